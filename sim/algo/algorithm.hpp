// The room of one algorithm: everything the rest of hbmlab asks of it, in one place. Each
// algorithm (a pass of one, or a variant with a mask) is a class under sim/algo/<name>/ that
// implements Algorithm, and one line of sim/algo/registry.cpp lists it. The CLI, bounds, sweep,
// validate, the engine, the view model and the window iterate over the registry or ask the room;
// none of them switches on an algorithm. sim/README.md says how to add one.
//
// [SECTION] Algorithm: the interface a room implements
// [SECTION] Algo: a handle on a room, and the registry
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/algo/kernel_tiles.hpp"
#include "sim/algo/on_chip.hpp"
#include "sim/algo/step.hpp"
#include "sim/bounds/bound.hpp"
#include "sim/engine/counters.hpp"
#include "sim/engine/plan.hpp"
#include "sim/numerics/attention.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// [SECTION] Algorithm: the interface a room implements

// What the window draws for an algorithm. viz/ reads these and holds no per-algorithm switch.
struct WindowTraits {
  std::string_view label{};             // in the algorithm menu: "flash1 (Alg. 1)"
  std::array<std::uint8_t, 3> colour{};  // RGB of its plots, bars and headings
  std::string_view partner{};           // the algorithm shown beside it when side by side
  bool scores_in_hbm = false;           // S and P go through HBM: the memory view fills them block by
                                        // block and the matrix view shows both
  bool running_softmax = true;          // the softmax panel follows a running max m and sum ℓ per block;
  int row_softmax_line = 0;             // else the line that takes a whole row's softmax at once,
  std::string_view softmax_note{};      // and what the panel says about it
  std::string_view visit_order{};       // beside the matrix: the order of the block pairs ("": none)
  std::string_view sram_note{};         // under the SRAM box: what never reaches SRAM or HBM
  bool cta_per_row_block = false;       // one CTA per Q_i (else one per (batch, head)) in the memory view
  // When scores_in_hbm: the two N × N tensors the memory and matrix views fill block by block as
  // their stores happen, and what the matrix view calls them (standard's backward writes dP and dS).
  std::array<Tensor, 2> hbm_scores = {Tensor::S, Tensor::P};
  std::array<std::string_view, 2> hbm_scores_titles = {"S in HBM (line 1 writes it)", "P in HBM (line 2 writes it)"};
  std::string_view ready_note = "ready: Q, K and V are in HBM; nothing has moved yet";  // before the first step
  bool cta_per_col_block = false;       // one CTA per K_j, V_j (FlashAttention-2's backward) in the memory view
};

// What the forward pass must leave in HBM for a backward room, besides Q, K and V: the paper's
// memory claim (standard keeps P, N² per head; FlashAttention keeps O and its row statistics, N).
struct ForwardState {
  std::string_view tensors;                // "P" or "O, ℓ, m", as printed
  std::int64_t bytes_per_head = 0;         // all of it, one (batch, head)
  std::int64_t extra_bytes_per_head = 0;   // beyond the output O, which the forward writes anyway
};

// The paper's block rule (FlashAttention, Algorithm 1, line 1): a larger block ⌈M/(k·d)⌉ and a
// smaller min(⌈M/(k·d)⌉, d), both clamped to N, with k = 4 for rooms whose SRAM holds four d-wide
// blocks (Q_i, K_j, V_j, O_i). Each room's paper_blocks says which of Br and Bc is which.
struct PaperRule {
  std::int64_t big = 0, small = 0;
};
inline PaperRule paper_rule(std::int64_t M, std::int64_t d, std::int64_t N, std::int64_t k = 4) {
  const std::int64_t big = std::min(ceil_div(M, k * d), N);
  return {big, std::min({big, d, N})};
}

// A Hopper room's CTA (flash3): the K/V ring's depth and the warpgroups that consume it (one
// producer warpgroup besides). `simulate --json` adds both to "blocks".
struct Pipeline {
  std::int64_t stages = 0;
  std::int64_t consumer_warpgroups = 0;
};

// Problem shapes beyond self-attention that a room models; the others are refused by name.
struct ShapeSupport {
  bool query_len = false;   // NQ < N (decoding)
  bool kv_heads = false;    // HKV < H (grouped-query attention)
  bool block_mask = false;  // --block-mask
  bool splits = false;      // --splits (split-KV decoding)
  bool unified_max = false; // --unified-max (FlashDecoding++)
};

// The non-matmul operations of one instance that set algorithms apart (the report prints them for
// decoding problems): exponentials, rescales of the running output, the running-max updates each
// later block must wait for, and the kernel boundaries every CTA waits at.
struct NonMatmulOps {
  std::int64_t exponentials = 0;       // e^x: one per score, plus rescale factors and log-sum-exp weights
  std::int64_t rescaled_elements = 0;  // elements of O (or O_part) multiplied by e^(m_old − m_new) or e^(LSE_s − LSE)
  std::int64_t max_updates = 0;        // per row and K/V block: a new running max the next block depends on
  std::int64_t kernels = 0;            // launches: each boundary is a grid-wide synchronisation
  std::string_view note;               // what the algorithm adds or avoids, in words
};

class Algorithm {
public:
  virtual ~Algorithm() = default;

  // Identity: the name of --algo, JSON's "algorithm" and measurement files' "kernel", the pass,
  // and the paper's name for the report's heading.
  virtual std::string_view name() const = 0;
  virtual Pass pass() const { return Pass::forward; }
  // The name in reports and tables: name() for a forward room, "flash2 backward" for a backward one.
  virtual std::string_view display_name() const { return name(); }
  virtual std::string_view paper_name() const = 0;
  virtual ShapeSupport supports() const { return {}; }
  // Kernels of other libraries this room models, as fragments of the names their profiler shows
  // ("flash_fwd_kernel"): `hbmlab validate` maps a recorded kernel to the room that names it
  // (room_for_kernel). Empty for a room that models no outside kernel.
  virtual std::span<const std::string_view> external_kernels() const { return {}; }
  // Throws InputError naming the option when the problem has a shape this room does not model.
  void check_problem(const AttentionProblem& problem) const;

  // The problem as this room runs it on a GPU with the chosen blocks: defaults the room resolves itself
  // (flash-decoding's split count fills the SMs; FlashDecoding++'s unified max φ). simulate(), the
  // window's replays and the sweeps call it once the blocks are chosen; throws InputError naming the
  // option a value does not suit. Most rooms take the problem as it is.
  virtual AttentionProblem prepare(const AttentionProblem& problem, Blocks, const GpuSpec&) const { return problem; }

  // Instances: the unit a room's counts, steps and CTAs describe, all alike. One (batch, head) by
  // default; a room that packs the g = H/HKV query heads sharing a K/V head into one CTA (GQA-packed
  // decoding) has one instance per (batch, K/V head), with g·NQ query rows (BlockGrid::group).
  virtual std::int64_t heads_per_instance(const AttentionProblem&) const { return 1; }
  std::int64_t instances(const AttentionProblem& p) const { return p.instances() / heads_per_instance(p); }
  std::string instance_name(const AttentionProblem& p) const;  // "(batch, head) pairs"
  BlockGrid grid(const AttentionProblem& p, Blocks b) const { return BlockGrid(p, b, heads_per_instance(p)); }

  // Blocks: bytes of SRAM one CTA holds at once, and the paper's default blocks for M elements.
  virtual std::int64_t working_set_bytes(const AttentionProblem& problem, Blocks blocks) const = 0;
  virtual Blocks paper_blocks(std::int64_t M_elements, std::int64_t d, std::int64_t N) const = 0;

  // Steps of one instance, each narrated in the paper's words.
  virtual void emit(const AttentionProblem& problem, Blocks blocks, StepSink& sink) const = 0;
  virtual std::string narrate(const Step& step) const { return narrate_step(step, compute_text(step)); }

  // The closed forms of one (batch, head) (docs/design.md#io-conventions), to check the step stream against; and the bound.
  virtual Counts closed_form(const AttentionProblem& problem, Blocks blocks) const = 0;
  virtual Bound bound(const AttentionProblem& problem, std::int64_t M_elements) const = 0;  // ratio left 0
  virtual double expected_exponent(SweepAxis axis) const = 0;
  // The non-matmul work the report sets beside the FLOPs for decoding problems: what this algorithm
  // adds or avoids. Rooms that take no decoding shape (the backward passes) leave it empty.
  virtual NonMatmulOps non_matmul_ops(const AttentionProblem&, Blocks) const { return {}; }

  // Numerics: attention computed through this algorithm's tiles, in its loop order.
  virtual TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& grid,
                                const TiledOptions& options) const = 0;

  // The timing engine: the kernels it launches, and its CTAs per (batch, head) for the roofline.
  virtual std::vector<KernelPlan> plan_kernels(const AttentionProblem& problem, Blocks blocks, const GpuSpec& gpu,
                                               const EngineOptions& options) const = 0;
  virtual std::int64_t roofline_ctas_per_instance(const BlockGrid& grid) const = 0;
  virtual bool has_kv_order() const { return false; }  // LaunchOverride::kv_descending means something
  // LaunchOverride's threads, registers and shared memory per CTA set its main kernel's launch (a room
  // of library GEMMs does not take them).
  virtual bool takes_launch() const { return true; }
  // LaunchOverride::threads_per_cta too: not a room whose CTA is warpgroups its blocks set.
  virtual bool takes_launch_threads() const { return takes_launch(); }
  // The tile shapes gpu/'s CUDA kernel of this room is compiled for (sim/algo/kernel_tiles.hpp, the
  // table gpu/ instantiates it from); empty for a room with no kernel.
  virtual std::span<const KernelTile> hbmlab_kernel_tiles() const { return {}; }
  // What that kernel takes besides its tiles (kernel_tiles.hpp: every one fp16 and bf16 only).
  virtual KernelTakes hbmlab_kernel_takes() const { return {}; }
  // What of the problem that kernel is not compiled for (dtype, d, NQ < N, HKV < H, a block mask), or
  // a row of S one CTA of `cta_bytes` cannot hold; none where it runs it. For a room with a kernel.
  std::optional<KernelMiss> hbmlab_kernel_miss(const AttentionProblem& p, std::optional<std::int64_t> cta_bytes) const {
    return kernel_miss(hbmlab_kernel_tiles(), hbmlab_kernel_takes(), p, cta_bytes);
  }
  // gpu/ has a CUDA kernel of this room, so LaunchOverride::hbmlab_kernels means something: the
  // engine times that kernel as written (`simulate --hbmlab-kernels`, validate's records).
  bool has_hbmlab_kernel() const { return !hbmlab_kernel_tiles().empty(); }
  // The tile shape that kernel runs at the problem's d when no blocks are given (`hbmlab measure
  // --blocks default`: the table's first row for d); none where it is not compiled for that d.
  std::optional<Blocks> hbmlab_kernel_blocks(const AttentionProblem& p) const {
    return default_tile(hbmlab_kernel_tiles(), p.head_dim);
  }
  // The first compiled tile shape at the problem's d whose working set one CTA of `cta_bytes` holds:
  // the default where it fits (a Hopper's 227 KiB holds every default; an A100's 163 KiB not all).
  std::optional<Blocks> hbmlab_kernel_blocks(const AttentionProblem& p, std::int64_t cta_bytes) const {
    for (const KernelTile& t : hbmlab_kernel_tiles())
      if (t.d == p.head_dim && working_set_bytes(p, Blocks{t.Br, t.Bc}) <= cta_bytes) return Blocks{t.Br, t.Bc};
    return std::nullopt;
  }

  // The window: what it draws, and what one SM's SRAM holds after each step.
  virtual const WindowTraits& window() const = 0;
  virtual void on_chip(const Step& step, const Step* previous, const AttentionProblem& problem, Sram& sram) const = 0;

  // Rooms whose CTA is a producer and consumer warpgroups around a ring of K/V stages (none elsewhere).
  virtual std::optional<Pipeline> pipeline(const AttentionProblem&, Blocks) const { return std::nullopt; }

  // Backward rooms: what the forward keeps in HBM for them (none for a forward room).
  virtual std::optional<ForwardState> forward_state(const AttentionProblem&) const { return std::nullopt; }

protected:
  // What a compute step computes, for narrate(): "S_2,3 = Q_2 K_3ᵀ on chip".
  virtual std::string compute_text(const Step& step) const = 0;
};

// [SECTION] Algo: a handle on a room, and the registry

// Copied freely, compared by identity, printed by name.
class Algo {
public:
  Algo(const Algorithm& room) : room_(&room) {}  // NOLINT: implicit, a room is an Algo
  const Algorithm& operator*() const { return *room_; }
  const Algorithm* operator->() const { return room_; }
  friend bool operator==(Algo a, Algo b) { return a.room_ == b.room_; }

private:
  const Algorithm* room_;
};

// The room's display name: "flash1", or "flash1 backward" for the backward pass.
inline std::string_view to_string(Algo algo) { return algo->display_name(); }
inline std::string_view paper_name(Algo algo) { return algo->paper_name(); }

// The rooms of one pass, in the order of `--algo all`, the window's menu and every table.
std::span<const Algo> algorithms(Pass pass = Pass::forward);
std::optional<Algo> parse_algo(std::string_view name, Pass pass = Pass::forward);
// A room the code names itself ("flash2" for PyTorch's FlashAttention-2 records); it must exist.
Algo algo_named(std::string_view name, Pass pass = Pass::forward);
// The CLI's default, `--algo flash1`.
Algo default_algo();
// The rooms of a pass that model a shape (`&ShapeSupport::splits`), in registry order.
std::vector<Algo> rooms_supporting(bool ShapeSupport::*shape, Pass pass = Pass::forward);
// The room of a pass that models an outside kernel (Algorithm::external_kernels), among the split-KV
// rooms or the others (PyTorch names a decode step's one-split kernel as it names its forward kernel).
std::optional<Algo> room_for_kernel(std::string_view kernel_name, Pass pass, bool split_kv);
// "flash1 and flash2" (or with "/" between): room names for messages and help.
std::string names_of(std::span<const Algo> rooms, std::string_view separator = ", ",
                     std::string_view last_separator = " and ");
// The rooms `--algo all` runs on a problem: every room of the pass, but the split-KV decoding rooms only
// on a decoding problem (NQ < N or HKV < H; on self-attention they are flash2 with the heads packed),
// and with a split count or φ only the rooms that take them.
std::vector<Algo> all_rooms_for(const AttentionProblem& problem, Pass pass = Pass::forward);
// "standard, flash1, flash2" (or "standard, flash1 or flash2" with last_separator " or "): the
// names of one pass, for messages and help.
std::string algo_names(Pass pass = Pass::forward, std::string_view last_separator = ", ");

}  // namespace hbmlab
