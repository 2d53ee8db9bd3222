// simulate --json's `on_chip` object (on_chip_json.hpp).
#include "sim/report/on_chip_json.hpp"

namespace hbmlab {

namespace {

// Seconds of an SM's pipe time a kernel's counts take at its clock, summed over the SMs.
struct PipeSeconds {
  std::optional<double> tensor, smem, ex2;
};

PipeSeconds pipe_seconds(const KernelTiming& k, const GpuSpec& gpu) {
  const OnChipCounts& c = k.on_chip;
  const double hz = k.sm_clock_mhz * 1e6;
  auto seconds = [&](double demand, double rate) -> std::optional<double> {
    if (!c.modelled || rate <= 0 || hz <= 0) return std::nullopt;
    return demand / (rate * hz);
  };
  PipeSeconds s;
  // The tensor pipe's time: mma.sync FLOPs at its rate plus wgmma FLOPs at theirs.
  const bool rates = (c.mma == 0 || gpu.mma_sync_flops_per_cycle_per_sm > 0) && (c.wgmma == 0 || gpu.wgmma_flops_per_cycle_per_sm > 0);
  if (rates)
    s.tensor = seconds((c.mma > 0 ? double(c.mma_flops()) / gpu.mma_sync_flops_per_cycle_per_sm : 0) +
                           (c.wgmma > 0 ? double(c.wgmma_flops) / gpu.wgmma_flops_per_cycle_per_sm : 0),
                       1.0);
  const SmemBytes t = c.total();
  s.smem = seconds(double(t.fill + t.read + t.mma_read + t.write), gpu.sram_bytes_per_cycle_per_sm);
  s.ex2 = seconds(32.0 * double(c.ex2), gpu.ex2_per_cycle_per_sm);
  return s;
}

PipeBusy shares(const PipeSeconds& s, double time_s, const GpuSpec& gpu) {
  const double sm_seconds = time_s * double(gpu.sm_count);
  auto share = [&](const std::optional<double>& v) -> std::optional<double> {
    if (!v || sm_seconds <= 0) return std::nullopt;
    return *v / sm_seconds;
  };
  PipeBusy p{share(s.tensor), share(s.smem), share(s.ex2), {}};
  double most = 0;  // a kernel with no work on any pipe (registers only) has no limiter
  for (auto [name, value] : {std::pair{"tensor", &p.tensor}, std::pair{"smem", &p.smem}, std::pair{"ex2", &p.ex2}})
    if (*value && **value > most) most = **value, p.limiter = name;
  return p;
}

}  // namespace

PipeBusy pipe_busy(const KernelTiming& kernel, const GpuSpec& gpu) {
  return shares(pipe_seconds(kernel, gpu), kernel.time_s, gpu);
}

PipeBusy pipe_busy(std::span<const KernelTiming> kernels, double time_s, const GpuSpec& gpu) {
  PipeSeconds sum;
  auto add = [](std::optional<double>& to, const std::optional<double>& v) {
    if (v) to = to.value_or(0.0) + *v;
  };
  for (const KernelTiming& k : kernels) {
    const PipeSeconds s = pipe_seconds(k, gpu);
    add(sum.tensor, s.tensor), add(sum.smem, s.smem), add(sum.ex2, s.ex2);
  }
  return shares(sum, time_s, gpu);
}

nlohmann::ordered_json on_chip_json(const OnChipCounts& c, const PipeBusy& pipes, double clock_mhz) {
  using Json = nlohmann::ordered_json;
  const SmemBytes t = c.total();
  Json by_tensor = Json::object();
  for (Tensor tensor : kAllTensors) {
    const SmemBytes& b = c[tensor];
    if (b.fill == 0 && b.read == 0 && b.mma_read == 0 && b.write == 0) continue;
    by_tensor[std::string(tensor_key(tensor))] = {{"smem_fill_bytes", b.fill}, {"smem_read_bytes", b.read},
                                                  {"smem_mma_read_bytes", b.mma_read}, {"smem_write_bytes", b.write}};
  }
  auto share = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  return {{"modelled", c.modelled},
          {"layout", c.layout},
          {"smem_fill_bytes", t.fill},
          {"smem_read_bytes", t.read},
          {"smem_mma_read_bytes", t.mma_read},
          {"smem_write_bytes", t.write},
          {"by_tensor", by_tensor},
          {"instructions", {{"mma", c.mma}, {"ldmatrix", c.ldmatrix}, {"ld_shared", c.ld_shared},
                            {"st_shared", c.st_shared}, {"ex2", c.ex2}, {"wgmma", c.wgmma}, {"mbarrier", c.mbarrier},
                            {"red", c.red}}},
          {"pipes", {{"tensor_busy", share(pipes.tensor)}, {"smem_busy", share(pipes.smem)}, {"ex2_busy", share(pipes.ex2)},
                     {"limiter", pipes.limiter.empty() ? Json(nullptr) : Json(pipes.limiter)},
                     {"clock_mhz", clock_mhz > 0 ? Json(clock_mhz) : Json(nullptr)}}}};
}

}  // namespace hbmlab
