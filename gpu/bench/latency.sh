#!/usr/bin/env bash
# The SM's latencies (latency.cu): builds it for sm_90a (or takes a binary built elsewhere), prints
# the SASS opcodes of each measured kernel (so the instruction each case times is on record) and
# runs it.
# Run: gpu/bench/latency.sh OUTDIR [BINARY]   (writes OUTDIR/latency.txt, latency-sass.txt)
set -euo pipefail
out=${1:?usage: latency.sh OUTDIR [BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${2:-$out/latency}
[ -n "${2:-}" ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/latency.cu"
cuobjdump -sass "$bin" | python3 "$here/sass_opcodes.py" > "$out/latency-sass.txt" || echo "latency.sh: no cuobjdump, no SASS listing" >&2
"$bin" | tee "$out/latency.txt"
