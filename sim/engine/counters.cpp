// Counting steps.
#include "sim/engine/counters.hpp"

#include "sim/common/sum.hpp"

namespace hbmlab {

std::int64_t Counts::hbm_read_bytes() const { return sum_field(hbm, &TensorTraffic::read_bytes); }
std::int64_t Counts::hbm_write_bytes() const { return sum_field(hbm, &TensorTraffic::write_bytes); }
std::int64_t Counts::accesses() const {
  return sum_field(hbm, &TensorTraffic::read_elems) + sum_field(hbm, &TensorTraffic::write_elems);
}

bool Counts::touches(Tensor t) const {
  const TensorTraffic& traffic = (*this)[t];
  return traffic.read_bytes > 0 || traffic.write_bytes > 0;
}

Counts Counts::scaled(std::int64_t k) const {
  Counts out = *this;
  for (TensorTraffic& t : out.hbm) {
    t.read_bytes *= k;
    t.write_bytes *= k;
    t.read_elems *= k;
    t.write_elems *= k;
  }
  out.matmul_flops *= k;
  out.non_matmul_flops *= k;
  out.sram_write_bytes *= k;
  out.sram_read_bytes *= k;
  out.steps *= k;
  out.skipped_blocks *= k;
  return out;
}

void IoCounter::on_step(const Step& s) {
  ++counts_.steps;
  TensorTraffic& t = counts_[s.tensor];
  const std::int64_t elems = s.rows * s.cols;
  switch (s.kind) {
    case StepKind::load:
      t.read_bytes += s.bytes;
      t.read_elems += elems;
      counts_.sram_write_bytes += s.bytes;
      break;
    case StepKind::store:
      t.write_bytes += s.bytes;
      t.write_elems += elems;
      counts_.sram_read_bytes += s.bytes;
      break;
    case StepKind::compute:
      (s.flop_kind == FlopKind::matmul ? counts_.matmul_flops : counts_.non_matmul_flops) += s.flops;
      counts_.sram_read_bytes += s.sram_read_bytes;
      break;
    case StepKind::skip:
      ++counts_.skipped_blocks;
      break;
  }
}

}  // namespace hbmlab
