#!/usr/bin/env bash
# One device call: correctness (GPU tests, compute-sanitizer), the flash2 speed table beside torch
# SDPA, and a small sweep of all kernels. Expects binaries built elsewhere in BIN (hbmlab,
# hbmlab_tests_gpu) and their shared libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/device_check.sh OUTDIR [parts: res,test,san,speed,sweep]
set -uo pipefail
out=${1:?usage: device_check.sh OUTDIR [parts]}
parts=${2:-res,test,san,speed}
source "$(dirname "$0")/device_env.sh"
if has res; then
  cuobjdump --dump-resource-usage "$BIN/hbmlab" 2>&1 | grep -E "Function|REG" | paste - - |
    sed -E 's/.*Function ([^ :]*).*REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+).*/REG \2 STACK \3 LOCAL \5  \1/' |
    c++filt | sort -u > "$out/resources.txt"
  grep -E "flash2_kernel" "$out/resources.txt" | cut -c1-160
fi
if has test; then
  echo "== GPU tests"; time "$BIN/hbmlab_tests_gpu" 2>&1 | tail -25
fi
if has san; then
  echo "== compute-sanitizer memcheck"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/hbmlab" measure --algo standard,flash1,flash2 \
    --seq-len 200 --tokens 400 --heads 2 --check-only --blocks all --dtype fp16,bf16 --causal both 2>&1 | tail -4
  echo "== compute-sanitizer racecheck"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/hbmlab" measure --algo standard,flash1,flash2 \
    --seq-len 200 --tokens 200 --heads 1 --check-only --blocks default --dtype fp16 --causal both 2>&1 | tail -4
  echo "== compute-sanitizer synccheck"
  compute-sanitizer --tool synccheck --error-exitcode 9 "$BIN/hbmlab" measure --algo flash2 \
    --seq-len 200 --tokens 200 --heads 1 --check-only --blocks all --dtype fp16 --causal both 2>&1 | tail -2
fi
if has speed; then
  echo "== speed: hbmlab flash2 and torch SDPA, same shapes (B*H*N = 262144, H = 16)"
  "$BIN/hbmlab" measure --algo flash2 --seq-len 2048,4096,8192,16384 --head-dim 64,128 --blocks all \
    --reps 30 --out "$out/speed-hbmlab.json" 2>&1 | tee "$out/speed-hbmlab.log"
  python3 "$here/calibrate_h100.py" --skip copy,chase,gemm --seq-lens 2048,4096,8192,16384 \
    --backends flash,cudnn --out "$out/speed-torch.json" > "$out/speed-torch.log" 2>&1
  python3 "$here/speed_table.py" "$out/speed-hbmlab.json" "$out/speed-torch.json" | tee "$out/speed-table.md"
fi
if has sweep; then
  echo "== sweep"
  "$BIN/hbmlab" measure ${SWEEP_ARGS:-} --out "$out/sweep.json" 2>&1 | tee "$out/sweep.log"
fi
