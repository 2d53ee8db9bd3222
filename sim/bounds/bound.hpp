// The IO bound an algorithm's counted HBM accesses are set beside, the axes `hbmlab bounds`
// sweeps, and the pieces the rooms' closed forms (Algorithm::closed_form, Algorithm::bound) share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/engine/counters.hpp"

namespace hbmlab {

struct Bound {
  std::string expression;  // "N d + N^2" or "N^2 d^2 / M"
  std::string kind;        // "Θ" (standard), "Θ and Ω" (flash, M in [d, Nd]) or "Θ" outside that range
  double value = 0;        // the expression for the whole problem (× B·H)
  double ratio = 0;        // counted accesses / value
};

// s: the density of a block mask (kept pairs over Tr·Tc), for rooms that take one.
enum class SweepAxis { N, d, M, s };
std::string_view to_string(SweepAxis axis);

// Θ(N d + N²): attention that writes S and P to HBM.
Bound materialised_bound(const AttentionProblem& problem);
// Θ(N² d² / M), and the lower bound Ω for M in [d, Nd] (Proposition 3): tiled exact attention.
Bound tiled_bound(const AttentionProblem& problem, std::int64_t M_elements);
// Θ(N d + N² d² s / M) for a fraction s of kept block pairs (Proposition 4): block-sparse attention.
Bound block_sparse_bound(const AttentionProblem& problem, std::int64_t M_elements, double s);

// Closed forms: the K/V blocks row block i visits under the causal mask (Tc without it), from the
// diagonal's position rather than from the grid's skip test, so that the two check each other.
std::int64_t visited_blocks(const BlockGrid& g, std::int64_t i);
// Adds elements read and written of one tensor, and their bytes.
void add_traffic(Counts& c, Tensor t, std::int64_t read_elems, std::int64_t write_elems, std::int64_t elem_bytes);

}  // namespace hbmlab
