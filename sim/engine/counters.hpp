// Observers of a step stream. IoCounter counts HBM reads and writes per tensor, SRAM traffic
// and FLOPs; Trace keeps every step (replay mode, for the GUI); FanOut feeds several observers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/algo/step.hpp"

namespace hbmlab {

struct TensorTraffic {
  std::int64_t read_bytes = 0, write_bytes = 0;
  std::int64_t read_elems = 0, write_elems = 0;  // the paper's "accesses" count elements
  bool operator==(const TensorTraffic&) const = default;
};

struct Counts {
  std::array<TensorTraffic, kTensorCount> hbm{};  // by Tensor
  std::int64_t matmul_flops = 0;
  std::int64_t non_matmul_flops = 0;
  std::int64_t sram_write_bytes = 0;  // HBM → SRAM loads
  std::int64_t sram_read_bytes = 0;   // SRAM → HBM stores and operands read by compute
  std::int64_t steps = 0;
  std::int64_t skipped_blocks = 0;    // causal (i, j) pairs skipped

  const TensorTraffic& operator[](Tensor t) const { return hbm[static_cast<int>(t)]; }
  TensorTraffic& operator[](Tensor t) { return hbm[static_cast<int>(t)]; }
  std::int64_t hbm_read_bytes() const;
  std::int64_t hbm_write_bytes() const;
  std::int64_t hbm_bytes() const { return hbm_read_bytes() + hbm_write_bytes(); }
  std::int64_t accesses() const;  // elements read plus elements written
  bool touches(Tensor t) const;
  Counts scaled(std::int64_t factor) const;  // every figure × factor (B·H alike instances)
  bool operator==(const Counts&) const = default;
};

class IoCounter final : public StepSink {
public:
  void on_step(const Step& step) override;
  const Counts& counts() const { return counts_; }
  void reset() { counts_ = {}; }

private:
  Counts counts_;
};

class Trace final : public StepSink {
public:
  void on_step(const Step& step) override { steps.push_back(step); }
  std::vector<Step> steps;
};

class FanOut final : public StepSink {
public:
  explicit FanOut(std::vector<StepSink*> sinks) : sinks_(std::move(sinks)) {}
  void on_step(const Step& step) override {
    for (StepSink* sink : sinks_) sink->on_step(step);
  }

private:
  std::vector<StepSink*> sinks_;
};

}  // namespace hbmlab
