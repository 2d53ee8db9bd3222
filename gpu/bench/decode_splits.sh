#!/usr/bin/env bash
# How the split count moves flash-decoding's time on one decode step: the room's default (every SM
# filled once) against more splits, B = 1 and 8, 32 query heads on 8 K/V heads, d = 128, NQ = 1.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/decode_splits.sh OUTDIR
set -uo pipefail
out=${1:?usage: decode_splits.sh OUTDIR}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
mkdir -p "$out"
for spec in "1:17 33 66 132" "8:3 4 8 16"; do
  b=${spec%%:*}
  for s in ${spec#*:}; do
    "$BIN/hbmlab" measure --algo flash-decoding --seq-len 16384,131072 --query-len 1 --heads 32 --kv-heads 8 --batch "$b" \
      --splits "$s" --head-dim 128 --causal no --reps 30 --counters none --out "$out/splits-b$b-s$s.json" 2>&1 | grep "ms "
  done
done
