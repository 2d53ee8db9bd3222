// Building launch plans.
#include "sim/engine/plan.hpp"

namespace hbmlab {
namespace {

// DRAM and L2 move whole 32-byte sectors. A tile that spans whole rows of its tensor is one
// contiguous run; an S_ij or P_ij tile is `rows` runs of cols × element bytes (rows assumed to
// start on a sector boundary, true whenever N × element bytes is a multiple of 32).
std::int64_t sector_bytes_of(const Step& s, std::int64_t full_width, std::int64_t sector) {
  auto round_up = [&](std::int64_t b) { return (b + sector - 1) / sector * sector; };
  if (s.cols >= full_width || s.rows <= 1) return round_up(s.bytes);
  return s.rows * round_up(s.bytes / s.rows);
}

}  // namespace

void apply_launch(KernelPlan& k, const LaunchOverride& launch) {
  if (launch.threads_per_cta) k.threads_per_cta = *launch.threads_per_cta;
  if (launch.registers_per_thread) k.registers_per_thread = *launch.registers_per_thread;
  if (launch.smem_bytes_per_cta) k.smem_bytes_per_cta = *launch.smem_bytes_per_cta;
}

void PlanBuilder::begin_program() {
  plan_.programs.push_back({static_cast<std::int32_t>(plan_.phases.size()), 0});
  open_ = false;
}

void PlanBuilder::begin_phase() {
  plan_.phases.push_back({static_cast<std::int32_t>(plan_.accesses.size()), 0, 0, 0, 0});
  ++plan_.programs.back().phase_count;
  open_ = true;
}

void PlanBuilder::access(const Step& s, std::int64_t paper_bytes) {
  if (!open_) begin_phase();
  TileAccess a;
  a.tensor = s.tensor;
  a.store = s.kind == StepKind::store;
  const bool by_j = by_column_block(s.tensor);
  const bool square = is_score_block(s.tensor);
  // A split's partial output (split-KV decoding) is one tile per (i, split); splits never outnumber Tc.
  const bool by_split = s.tensor == Tensor::O_part || s.tensor == Tensor::lse_part;
  a.tile = static_cast<std::int32_t>(square || by_split ? std::int64_t{s.i} * Tc_ + s.j : by_j ? s.j : s.i);
  a.bytes = s.bytes;
  const std::int64_t full_width = square ? p_.seq_len : is_stat(s.tensor) ? 1 : p_.head_dim;
  a.sector_bytes = sector_bytes_of(s, full_width, sector_);
  a.paper_bytes = paper_bytes;
  plan_.accesses.push_back(a);
  CtaPhase& ph = plan_.phases.back();
  ++ph.access_count;
  ph.sram_bytes += s.bytes;
}

void PlanBuilder::compute(const Step& s) {
  if (!open_) begin_phase();
  CtaPhase& ph = plan_.phases.back();
  (s.flop_kind == FlopKind::matmul ? ph.matmul_flops : ph.non_matmul_flops) += s.flops;
  ph.sram_bytes += s.sram_read_bytes;
}

void PlanBuilder::on_step(const Step& s) {
  if (s.kind == StepKind::skip) return;
  if (s.kind == StepKind::load && worked_) {
    begin_phase();
    worked_ = false;
  }
  if (s.kind == StepKind::compute) {
    compute(s);
    worked_ = true;
  } else {
    access(s, s.bytes);
    if (s.kind == StepKind::store) worked_ = true;
  }
}

}  // namespace hbmlab
