#!/usr/bin/env bash
# How HBM bandwidth is shared among the CTAs in flight (hbm_share.cu): per-SM bandwidth against the
# bytes in flight per SM, with every SM busy and with one SM alone; the 136-, 264- and 268-CTA grids
# of the decode's splits, where some SMs hold two CTAs; the same with unequal slices.
# With MODES="deep partial" (any of sweep tail uneven mixed deep partial; hbm_share.cu says what
# each measures) only those run: 128-thread CTAs with 24–64 loads a thread in flight, and grids
# that fill 1–132 SMs with one CTA each.
# Run: [MODES="..."] gpu/bench/hbm_share.sh OUTDIR [BINARY]   (writes OUTDIR/hbm-share.txt and hbm-share.json)
set -euo pipefail
out=${1:?usage: hbm_share.sh OUTDIR [BINARY]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${2:-$out/hbm_share}
[ -n "${2:-}" ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/hbm_share.cu"
# shellcheck disable=SC2086  # MODES is a list of words
"$bin" "$out/hbm-share.json" ${MODES:-} | tee "$out/hbm-share.txt"
# The loads are LDGSTS (cp.async) in every stream<U> kernel: counted per kernel, for the record.
cuobjdump -sass "$bin" 2>/dev/null | grep -oE "Function : [^ ]+|LDGSTS[.A-Z0-9]*" | uniq -c > "$out/hbm-share-sass.txt" || true
