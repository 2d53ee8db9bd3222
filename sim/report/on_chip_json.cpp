// simulate --json's `on_chip` object (on_chip_json.hpp).
#include "sim/report/on_chip_json.hpp"

namespace hbmlab {

PipeBusy pipe_busy(const OnChipCounts& c, double time_s, const GpuSpec& gpu) {
  const double cycles = time_s * gpu.clock_mhz * 1e6 * double(gpu.sm_count);
  auto busy = [&](double demand, double rate) -> std::optional<double> {
    if (!c.modelled || rate <= 0 || cycles <= 0) return std::nullopt;
    return demand / (rate * cycles);
  };
  // The tensor pipe's time: mma.sync FLOPs at its rate plus wgmma FLOPs at theirs.
  const double tensor_sm_cycles =
      (c.mma > 0 ? double(c.mma_flops()) / gpu.mma_sync_flops_per_cycle_per_sm : 0) +
      (c.wgmma > 0 ? double(c.wgmma_flops) / gpu.wgmma_flops_per_cycle_per_sm : 0);
  const bool rates = (c.mma == 0 || gpu.mma_sync_flops_per_cycle_per_sm > 0) && (c.wgmma == 0 || gpu.wgmma_flops_per_cycle_per_sm > 0);
  const SmemBytes t = c.total();
  PipeBusy p;
  if (rates) p.tensor = busy(tensor_sm_cycles, 1.0);
  p.smem = busy(double(t.fill + t.read + t.mma_read + t.write), gpu.sram_bytes_per_cycle_per_sm);
  p.ex2 = busy(32.0 * double(c.ex2), gpu.ex2_per_cycle_per_sm);
  double most = 0;  // a kernel with no work on any pipe (registers only) has no limiter
  for (auto [name, value] : {std::pair{"tensor", &p.tensor}, std::pair{"smem", &p.smem}, std::pair{"ex2", &p.ex2}})
    if (*value && **value > most) most = **value, p.limiter = name;
  return p;
}

nlohmann::ordered_json on_chip_json(const OnChipCounts& c, double time_s, const GpuSpec& gpu) {
  using Json = nlohmann::ordered_json;
  const SmemBytes t = c.total();
  Json by_tensor = Json::object();
  for (Tensor tensor : kAllTensors) {
    const SmemBytes& b = c[tensor];
    if (b.fill == 0 && b.read == 0 && b.mma_read == 0 && b.write == 0) continue;
    by_tensor[std::string(tensor_key(tensor))] = {{"smem_fill_bytes", b.fill}, {"smem_read_bytes", b.read},
                                                  {"smem_mma_read_bytes", b.mma_read}, {"smem_write_bytes", b.write}};
  }
  const PipeBusy pipes = pipe_busy(c, time_s, gpu);
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
                     {"clock_mhz", gpu.clock_mhz}}}};
}

}  // namespace hbmlab
