#!/usr/bin/env bash
# One device call for split-KV decoding: the GPU tests, compute-sanitizer on decode launches, a
# `hbmlab measure` sweep of decode steps (Llama-style GQA, 1 to 8 query rows, 1K to 128K keys) with
# counters, and the bandwidth table beside PyTorch SDPA and the device's copy bandwidth (decode_speed.py).
# Binaries built elsewhere in BIN, libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/decode.sh OUTDIR [parts: test,san,sweep,sdpa]
set -uo pipefail
out=${1:?usage: decode.sh OUTDIR [parts]}
parts=${2:-test,san,sweep,sdpa}
source "$(dirname "$0")/device_env.sh"
if has test; then
  echo "== GPU tests"; "$BIN/hbmlab_tests_gpu" 2>&1 | tee "$out/gpu-tests.log" | tail -6
fi
if has san; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool, decoding"
    compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure --algo flash-decoding,flashdecoding++ \
      --seq-len 1000 --query-len 1,8 --heads 8 --kv-heads 2 --batch 2 --splits 3 --head-dim 64,128 --check-only \
      --blocks all --causal both 2>&1 | tee "$out/sanitizer-decode-$tool.log" | tail -2
  done
fi
if has sweep; then
  for b in ${BATCHES:-1 8}; do
    echo "== measure: decode steps, B = $b"
    "$BIN/hbmlab" measure --algo flash-decoding,flashdecoding++ --seq-len ${SEQ_LENS:-1024,4096,16384,32768,131072} \
      --query-len 1,4 --heads 32 --kv-heads 8 --batch $b --head-dim 128 --causal no --reps 50 \
      --out "$out/decode-b$b.json" 2>&1 | tee "$out/decode-b$b.log" | grep -v "^ " | tail -24
  done
fi
if has sdpa; then
  echo "== PyTorch SDPA decode and the copy bandwidth"
  python3 "$here/decode_speed.py" "$out/decode-sdpa.json" "$out"/decode-b*.json 2>&1 | tee "$out/decode-sdpa.log" | tail -40
fi
