// The registry of rooms. Adding an algorithm: its folder under sim/algo/ defines its accessor, and
// one line below declares it and lists it (sim/README.md, "Adding an algorithm").
#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "sim/algo/algorithm.hpp"
#include "sim/common/error.hpp"

namespace hbmlab {

const Algorithm& flash1_room();  // the CLI's default, `--algo flash1`

// HBMLAB_ROOM(accessor): declares `const Algorithm& accessor()`, which the room's folder defines, and
// yields its Algo, so that a room is named in one line of the list below and nowhere else here.
#define HBMLAB_ROOM(accessor) [] { const Algorithm& accessor(); return Algo(accessor()); }()

// Every room, in the order `--algo all` lists them (each pass keeps this order).
static const std::vector<Algo>& rooms() {
  static const std::vector<Algo> all = {
      HBMLAB_ROOM(standard_room),           // sim/algo/standard: standard attention, Algorithm 0
      HBMLAB_ROOM(flash1_room),             // sim/algo/flash1: FlashAttention, Algorithm 1
      HBMLAB_ROOM(flash2_room),             // sim/algo/flash2: FlashAttention-2, Algorithm 1
      HBMLAB_ROOM(flash3_room),             // sim/algo/flash3: FlashAttention-3, Algorithm 1 (Hopper)
      HBMLAB_ROOM(flash_decoding_room),     // sim/algo/flash_decoding: Flash-Decoding, split-KV
      HBMLAB_ROOM(flashdecoding_pp_room),   // sim/algo/flashdecoding_pp: FlashDecoding++, unified max
      HBMLAB_ROOM(standard_backward_room),  // sim/algo/standard_backward: Algorithm 3
      HBMLAB_ROOM(flash1_backward_room),    // sim/algo/flash1_backward: FlashAttention, Algorithm 4
      HBMLAB_ROOM(flash2_backward_room),    // sim/algo/flash2_backward: FlashAttention-2, Algorithm 2
      HBMLAB_ROOM(flash3_backward_room),    // sim/algo/flash3: flash2 backward's HBM accesses, FlashAttention-3's SM
  };
  return all;
}
#undef HBMLAB_ROOM

namespace {

const std::vector<Algo>& rooms_of(Pass pass) {
  static const auto of = [](Pass p) {
    std::vector<Algo> out;
    std::copy_if(rooms().begin(), rooms().end(), std::back_inserter(out), [&](Algo a) { return a->pass() == p; });
    return out;
  };
  static const std::vector<Algo> forward = of(Pass::forward), backward = of(Pass::backward);
  return pass == Pass::forward ? forward : backward;
}

}  // namespace

std::span<const Algo> algorithms(Pass pass) { return rooms_of(pass); }

std::optional<Algo> parse_algo(std::string_view name, Pass pass) {
  for (Algo a : rooms_of(pass))
    if (a->name() == name) return a;
  return std::nullopt;
}

Algo algo_named(std::string_view name, Pass pass) {
  const std::optional<Algo> a = parse_algo(name, pass);
  if (!a) throw std::logic_error(fmt::format("algo_named: no {} room '{}' in sim/algo/registry.cpp", to_string(pass), name));
  return *a;
}

Algo default_algo() { return flash1_room(); }

std::vector<Algo> rooms_supporting(bool ShapeSupport::*shape, Pass pass) {
  std::vector<Algo> out;
  for (Algo a : rooms_of(pass))
    if (a->supports().*shape) out.push_back(a);
  return out;
}

std::optional<Algo> room_for_kernel(std::string_view kernel_name, Pass pass, bool split_kv) {
  for (Algo a : rooms_of(pass))
    if (a->supports().splits == split_kv)
      for (std::string_view fragment : a->external_kernels())
        if (kernel_name.find(fragment) != std::string_view::npos) return a;
  return std::nullopt;
}

std::string names_of(std::span<const Algo> rooms, std::string_view separator, std::string_view last_separator) {
  std::string out;
  for (std::size_t k = 0; k < rooms.size(); ++k)
    out += fmt::format("{}{}", k == 0 ? "" : k + 1 == rooms.size() ? last_separator : separator, rooms[k]->name());
  return out;
}

std::vector<Algo> all_rooms_for(const AttentionProblem& p, Pass pass) {
  const bool decoding = p.Nq() < p.seq_len || p.Hkv() < p.heads || p.kv_splits > 0 || p.unified_max;
  std::vector<Algo> out;
  for (Algo a : rooms_of(pass)) {
    const ShapeSupport s = a->supports();
    if (s.splits && !decoding) continue;
    if ((p.kv_splits > 0 && !s.splits) || (p.unified_max && !s.unified_max)) continue;
    out.push_back(a);
  }
  return out;
}

std::string algo_names(Pass pass, std::string_view last_separator) { return names_of(rooms_of(pass), ", ", last_separator); }

std::string Algorithm::instance_name(const AttentionProblem& p) const {
  const std::int64_t g = heads_per_instance(p);
  return g == 1 ? "(batch, head) pairs" : fmt::format("(batch, K/V head) groups of {} query heads", g);
}

void Algorithm::check_problem(const AttentionProblem& p) const {
  const ShapeSupport s = supports();
  if (p.query_len > 0 && p.query_len != p.seq_len && !s.query_len)
    fail_input("--query-len: {} models self-attention only (NQ = N); decoding algorithms take NQ < N", display_name());
  if (p.kv_heads > 0 && p.kv_heads != p.heads && !s.kv_heads)
    fail_input("--kv-heads: {} models one K/V head per query head (HKV = H)", display_name());
  // The rooms that do take the shape, from the registry: "(flash1 and flash2 do)".
  auto who = [&](bool ShapeSupport::*shape, std::string_view one, std::string_view many) {
    const std::vector<Algo> rooms = rooms_supporting(shape, pass());
    return fmt::format("{} {}", names_of(rooms), rooms.size() == 1 ? one : many);
  };
  if (p.block_mask && !s.block_mask)
    fail_input("--block-mask: {} does not take a block mask ({})", display_name(), who(&ShapeSupport::block_mask, "does", "do"));
  if (p.kv_splits > 0 && !s.splits)
    fail_input("--splits: {} does not split the K/V cache ({})", display_name(), who(&ShapeSupport::splits, "does", "do"));
  if (p.unified_max && !s.unified_max)
    fail_input("--unified-max: {} keeps a running max ({} φ)", display_name(), who(&ShapeSupport::unified_max, "takes", "take"));
}

}  // namespace hbmlab
