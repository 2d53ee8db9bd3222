#!/usr/bin/env bash
# HBM's rate for tiles of short rows (hbm_runs.cu): a 2 GiB matrix read or written once as 64-row
# tiles of 128 B to 2 KB rows a pitch apart (a row of S or P: N × 2 bytes), the CTAs across the rows
# or down the row blocks, against whole rows (CUDA events, median of 5).
# Run: [PITCHES="2048 8192"] gpu/bench/hbm_runs.sh OUTDIR [BINARY]   (writes OUTDIR/hbm-runs.txt)
set -euo pipefail
out=${1:?usage: hbm_runs.sh OUTDIR [BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${2:-$out/hbm_runs}
[ -n "${2:-}" ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/hbm_runs.cu"
# shellcheck disable=SC2086  # PITCHES is a list of words
"$bin" ${PITCHES:-} | tee "$out/hbm-runs.txt"
