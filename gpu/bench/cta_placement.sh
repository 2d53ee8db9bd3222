#!/usr/bin/env bash
# Where the block scheduler puts CTAs (cta_placement.cu): grids of k·132·c + r equal CTAs at c = 1–3
# per SM, CTAs that all end at once, CTAs that share their SM's FMA pipes or shared memory, and CTAs
# of unequal length; per grid, which SMs took the last partial wave and when.
# Run: gpu/bench/cta_placement.sh OUTDIR [BINARY]   (writes OUTDIR/cta-placement.txt and cta-placement.json)
set -euo pipefail
out=${1:?usage: cta_placement.sh OUTDIR [BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${2:-$out/cta_placement}
[ -n "${2:-}" ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/cta_placement.cu"
"$bin" "$out/cta-placement.json" | tee "$out/cta-placement.txt"
