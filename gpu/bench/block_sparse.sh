#!/usr/bin/env bash
# One device call for block-sparse flash2: the GPU tests (masked shapes included), compute-sanitizer
# on masked launches, a `hbmlab measure` sweep over masks and densities with counters, and the table
# beside PyTorch FlexAttention (block_sparse_speed.py). Binaries built elsewhere in BIN, libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/block_sparse.sh OUTDIR [parts: test,san,sweep,flex]
set -uo pipefail
out=${1:?usage: block_sparse.sh OUTDIR [parts]}
parts=${2:-test,san,sweep,flex}
source "$(dirname "$0")/device_env.sh"
MASKS=${MASKS:-none,local:1024,local:2048,butterfly,random:0.1,random:0.2,random:0.3}
if has test; then
  echo "== GPU tests"; "$BIN/hbmlab_tests_gpu" 2>&1 | tail -6
fi
if has san; then
  echo "== compute-sanitizer memcheck, masked"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/hbmlab" measure --algo flash2 --seq-len 1000 --tokens 2000 \
    --heads 2 --check-only --blocks all --dtype fp16,bf16 --causal both --block-mask local:150,random:0.05:3 \
    --kv-order both 2>&1 | tail -3
  echo "== compute-sanitizer racecheck, masked"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/hbmlab" measure --algo flash2 --seq-len 600 --tokens 600 \
    --heads 1 --check-only --blocks default --dtype fp16 --causal both --block-mask butterfly 2>&1 | tail -3
fi
if has sweep; then
  echo "== measure: flash2 over block masks (B*H*N = 262144, H = 16)"
  "$BIN/hbmlab" measure --algo flash2 --seq-len ${SEQ_LENS:-8192,16384} --head-dim 64,128 --causal both \
    --block-mask "$MASKS" --reps 30 --out "$out/block-sparse.json" 2>&1 | tee "$out/block-sparse.log" | grep -v "^ " | tail -70
fi
if has flex; then
  echo "== FlexAttention with the same block masks"
  python3 "$here/block_sparse_speed.py" "$BIN/hbmlab" "$out/block-sparse.json" "$out/block-sparse-flex.json" 2>&1 |
    tee "$out/block-sparse-flex.log" | grep "^|\|^÷\|rror" | head -80
fi
