// Block masks for block-sparse FlashAttention (the FlashAttention paper's Algorithm 5) and
// sliding-window attention: which (i, j) block pairs flash1 and flash2 visit (`--block-mask SPEC`).
// A pair the mask drops is skipped like a causal pair: no loads, no compute. SPEC is one of
//   local:W              keep a pair if some query and key in it are fewer than W tokens apart
//                        (a sliding window; with --causal, Mistral's and Longformer's local layers)
//   butterfly            the flat butterfly of Pixelated Butterfly (Chen, Dao et al., ICLR 2022), the
//                        pattern the FlashAttention paper uses: keep (i, j) when i = j or i XOR j is a
//                        power of two, the union of the supports of butterfly factors of every stride
//   random:DENSITY[:SEED] keep each pair with probability DENSITY, from a hash of (SEED, i, j)
//   PATH                 a text file of Tr lines of Tc characters 0 or 1 (row block i, column block j)
#pragma once

#include <memory>
#include <string_view>

#include "sim/workload/problem.hpp"

namespace hbmlab {

// Throws InputError naming --block-mask (or `file:line` for a mask file) when SPEC is malformed.
std::shared_ptr<const BlockMask> parse_block_mask(std::string_view spec);

// A mask file's text (Tr lines of Tc characters 0 or 1; blank lines and CR line ends ignored), with
// `origin` naming it in messages. Throws InputError "origin:line: what is wrong".
std::shared_ptr<const BlockMask> parse_mask_text(std::string_view text, std::string_view origin);

// Pairs a grid keeps (the causal mask and the block mask together), and that over Tr × Tc.
std::int64_t kept_pairs(const BlockGrid& grid);
double density(const BlockGrid& grid);

}  // namespace hbmlab
