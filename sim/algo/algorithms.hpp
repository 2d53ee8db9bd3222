// The three forward algorithms as step generators for one (batch, head).
// standard: FlashAttention paper, Algorithm 0. flash1: Algorithm 1 as printed (K/V outer loop,
// O, ℓ, m in HBM). flash2: FlashAttention-2, Algorithm 1 (Q outer loop, O, ℓ, m on chip).
#pragma once

#include "sim/algo/step.hpp"

namespace hbmlab {

void emit_standard(const AttentionProblem& problem, Blocks blocks, StepSink& sink);
void emit_flash1(const AttentionProblem& problem, Blocks blocks, StepSink& sink);
void emit_flash2(const AttentionProblem& problem, Blocks blocks, StepSink& sink);

void emit_steps(Algo algo, const AttentionProblem& problem, Blocks blocks, StepSink& sink);

}  // namespace hbmlab
