#!/usr/bin/env bash
# One device call: GPU tests, sanitizers, CUPTI smoke test and the CUPTI-vs-ncu cross-check.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/device_verify.sh OUTDIR
set -uo pipefail
out=${1:?usage: device_verify.sh OUTDIR}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
echo "== GPU tests"; "$BIN/hbmlab_tests_gpu" > "$out/tests.log" 2>&1; echo "rc=$?"; tail -4 "$out/tests.log"
{
  echo "== memcheck"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/hbmlab" measure --algo standard,flash1,flash2 \
    --seq-len 200 --tokens 400 --heads 2 --check-only --blocks all --dtype fp16,bf16 --causal both; echo "rc=$?"
  echo "== racecheck"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/hbmlab" measure --algo standard,flash1,flash2 \
    --seq-len 200 --tokens 200 --heads 1 --check-only --blocks all --dtype fp16 --causal both; echo "rc=$?"
  echo "== synccheck"
  compute-sanitizer --tool synccheck --error-exitcode 9 "$BIN/hbmlab" measure --algo standard,flash1,flash2 \
    --seq-len 200 --tokens 200 --heads 1 --check-only --blocks default --dtype fp16 --causal both; echo "rc=$?"
} > "$out/sanitizers.log" 2>&1
grep -E "^==|rc=|SUMMARY|FAIL" "$out/sanitizers.log"
echo "== CUPTI vs ncu"
args=(--algo standard,flash1,flash2 --seq-len 1024,4096 --head-dim 64,128 --causal both --reps 10)
"$BIN/hbmlab" measure "${args[@]}" --out "$out/xcheck-cupti.json" > "$out/xcheck-cupti.log" 2>&1; echo "rc=$?"
tail -3 "$out/xcheck-cupti.log"
cp "$out/xcheck-cupti.json" "$out/xcheck-ncu.json"
HBMLAB="$BIN/hbmlab" "$here/measure_counters.sh" "$out/xcheck-ncu.json" "$out/xcheck-ncu.csv" "${args[@]}" \
  > "$out/xcheck-ncu.log" 2>&1; echo "rc=$?"; tail -2 "$out/xcheck-ncu.log"
python3 "$here/xcheck_counters.py" "$out/xcheck-cupti.json" "$out/xcheck-ncu.json" | tee "$out/xcheck.md"
