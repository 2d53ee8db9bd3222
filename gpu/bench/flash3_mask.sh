#!/usr/bin/env bash
# flash3 with block masks in one device call: the GPU tests (the masked flash3 test at every rung, the
# flash3 ladder and backward, flash2's masked tests, the refusals), compute-sanitizer memcheck, racecheck
# and synccheck on small masked flash3 launches (v3, the default with a mask, and v4), then flash3 and
# flash2 records over block masks with CUPTI counters (h100-block-sparse.json's shapes at N = 8K) and
# flash3's v4 beside them. Tests and sanitizers run side by side (their time is the CPU's reference);
# the records run alone. Binaries built elsewhere in BIN, libraries in LIB.
# `suite` adds the every-shape ragged-N and stress tests (flash3's unmasked kernels among them).
# SAN_VERSIONS (default "3 4") and SAN_BLOCKS (default "default"; "all" adds d = 64 at 128 × 128) pick
# the sanitized rungs and shapes.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/flash3_mask.sh OUTDIR [parts: test,suite,san,record,v4]
set -uo pipefail
out=${1:?usage: flash3_mask.sh OUTDIR [parts]}
parts=${2:-test,san,record,v4}
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
MASKS=${MASKS:-none,local:1024,local:2048,butterfly,random:0.1,random:0.3}
pids=()
tests=()
if has test; then
  tests+=("flash3 with a block mask matches the fp64 masked reference"
         "flash3 at every rung of its ladder matches the fp64 reference"
         "[flash3][backward]"
         "flash2 with a block mask matches the fp64 masked reference"
         "kernels without block-mask support refuse one"
         "a mask file of another grid is refused with a line naming the file and the grid")
fi
if has suite; then
  tests+=("every compiled kernel shape matches the fp64 reference on ragged N" "default shapes survive the stress inputs")
fi
if [ ${#tests[@]} -gt 0 ]; then
  for k in "${!tests[@]}"; do
    (timeout 200 "$BIN/hbmlab_tests_gpu" "${tests[$k]}" > "$out/test-$k.log" 2>&1; echo "rc=$?" >> "$out/test-$k.log") &
    pids+=($!)
  done
fi
if has san; then
  small=(--algo flash3 --seq-len 600 --tokens 1200 --heads 2 --check-only --causal both --block-mask local:150,random:0.05:3
         --blocks ${SAN_BLOCKS:-default})
  for v in ${SAN_VERSIONS:-3 4}; do
    for tool in memcheck racecheck synccheck; do
      (HBMLAB_FLASH3_VERSION=$v timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure \
         "${small[@]}" --dtype $([ $tool = memcheck ] && echo fp16,bf16 || echo fp16) > "$out/san-$tool-v$v.log" 2>&1
       echo "rc=$?" >> "$out/san-$tool-v$v.log") &
      pids+=($!)
    done
  done
fi
for p in "${pids[@]}"; do wait "$p"; done
if [ ${#tests[@]} -gt 0 ]; then
  echo "== GPU tests"
  for f in "$out"/test-*.log; do echo "$(basename "$f" .log): $(grep -E '^(All tests passed|test cases:|assertions:)' "$f" | tr '\n' ' ') $(tail -1 "$f")"; done
  cat "$out"/test-*.log > "$out/tests.log"
fi
if has san; then
  echo "== compute-sanitizer, masked flash3 (N = 600, local:150 and random:0.05:3, causal both)"
  for f in "$out"/san-*.log; do
    echo "$(basename "$f" .log): $(grep -cE ' ok *$' "$f") ok, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) $(tail -1 "$f")"
  done
  for f in "$out"/san-*.log; do echo "== $(basename "$f" .log)"; cat "$f"; done > "$out/sanitizer.log"
fi
if has record; then
  echo "== records: flash3 and flash2 over block masks (N = 8192, B*H*N = 262144, H = 16), CUPTI counters"
  timeout 150 "$BIN/hbmlab" measure --algo flash3,flash2 --seq-len ${SEQ_LENS:-8192} --head-dim 64,128 --causal both \
    --block-mask "$MASKS" --reps 30 --out "$out/h100-flash3-block-sparse.json" > "$out/record.log" 2>&1
  echo "rc=$? $(grep -c ' ok' "$out/record.log") ok"; grep -E "FAIL|rror" "$out/record.log" | head -5
fi
if has v4; then
  echo "== flash3 v4 (persistent CTAs) on the same masked problems, times only"
  HBMLAB_FLASH3_VERSION=4 timeout 60 "$BIN/hbmlab" measure --algo flash3 --seq-len ${SEQ_LENS:-8192} --head-dim 64,128 \
    --causal both --block-mask "$MASKS" --reps 30 --counters none --out "$out/flash3-v4.json" > "$out/v4.log" 2>&1
  echo "rc=$? $(grep -c ' ok' "$out/v4.log") ok"; grep -E "FAIL|rror" "$out/v4.log" | head -5
fi
