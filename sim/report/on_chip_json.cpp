// simulate --json's `on_chip` object (on_chip_json.hpp).
#include "sim/report/on_chip_json.hpp"

namespace hbmlab {

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
  // Busy = demand / (rate per SM clock × SMs × clock × time).
  const double cycles = time_s * gpu.clock_mhz * 1e6 * double(gpu.sm_count);
  auto busy = [&](double demand, double rate) {
    return c.modelled && rate > 0 && cycles > 0 ? Json(demand / (rate * cycles)) : Json(nullptr);
  };
  // The tensor pipe's time: mma.sync FLOPs at its rate plus wgmma FLOPs at theirs.
  const double tensor_sm_cycles =
      (c.mma > 0 ? double(c.mma_flops()) / gpu.mma_sync_flops_per_cycle_per_sm : 0) +
      (c.wgmma > 0 ? double(c.wgmma_flops) / gpu.wgmma_flops_per_cycle_per_sm : 0);
  const bool rates = (c.mma == 0 || gpu.mma_sync_flops_per_cycle_per_sm > 0) && (c.wgmma == 0 || gpu.wgmma_flops_per_cycle_per_sm > 0);
  const Json tensor = rates ? busy(tensor_sm_cycles, 1.0) : Json(nullptr);
  const Json smem = busy(double(t.fill + t.read + t.mma_read + t.write), gpu.sram_bytes_per_cycle_per_sm);
  const Json ex2 = busy(32.0 * double(c.ex2), gpu.ex2_per_cycle_per_sm);
  std::string limiter;
  double most = -1;
  for (auto [name, value] : {std::pair{"tensor", &tensor}, std::pair{"smem", &smem}, std::pair{"ex2", &ex2}})
    if (value->is_number() && value->get<double>() > most) most = value->get<double>(), limiter = name;
  return {{"modelled", c.modelled},
          {"layout", c.layout},
          {"smem_fill_bytes", t.fill},
          {"smem_read_bytes", t.read},
          {"smem_mma_read_bytes", t.mma_read},
          {"smem_write_bytes", t.write},
          {"by_tensor", by_tensor},
          {"instructions", {{"mma", c.mma}, {"ldmatrix", c.ldmatrix}, {"ld_shared", c.ld_shared},
                            {"st_shared", c.st_shared}, {"ex2", c.ex2}, {"wgmma", c.wgmma}}},
          {"pipes", {{"tensor_busy", tensor}, {"smem_busy", smem}, {"ex2_busy", ex2},
                     {"limiter", limiter.empty() ? Json(nullptr) : Json(limiter)},
                     {"clock_mhz", gpu.clock_mhz}}}};
}

}  // namespace hbmlab
