#!/usr/bin/env bash
# Fuzzes the harnesses of build-fuzz/ (`make fuzz` builds it and calls this) for SECONDS each, one
# after another on one core:  tests/fuzz/run.sh [SECONDS] [HARNESS...]   (default 30 s, all four)
# HBMLAB_FUZZ_RUNS=N stops each harness after N executions instead (SECONDS still caps it).
# Fails on the first crash, sanitizer finding, leak, escaped exception, input slower than 10 s or
# run over 2 GiB. The input that did it is left in build-fuzz/fuzz-artifacts/HARNESS/: once the bug
# is fixed, add it to tests/fuzz/corpus/HARNESS/, where CTest replays it from then on. Inputs that
# reach new code collect in build-fuzz/fuzz-corpus/HARNESS/ (outside the repository).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(scenario gpu_spec measurements block_mask)
build=${HBMLAB_FUZZ_BUILD:-build-fuzz}
runs=()
[ -n "${HBMLAB_FUZZ_RUNS:-}" ] && runs=(-runs="$HBMLAB_FUZZ_RUNS")

for h in "${harnesses[@]}"; do
  case $h in
    scenario|gpu_spec) dict=toml.dict ;;
    measurements) dict=json.dict ;;
    block_mask) dict=mask.dict ;;
    *) echo "fuzz: unknown harness '$h' (scenario, gpu_spec, measurements, block_mask)" >&2; exit 2 ;;
  esac
  work=$build/fuzz-corpus/$h
  artifacts=$build/fuzz-artifacts/$h/
  log=$build/fuzz-$h.log
  mkdir -p "$work" "$artifacts"
  start=$SECONDS
  if ! "$build/tests/fuzz/fuzz_$h" -max_total_time="$seconds" "${runs[@]}" -timeout=10 -rss_limit_mb=2048 \
       -dict="tests/fuzz/$dict" -artifact_prefix="$artifacts" -print_final_stats=1 \
       "$work" "tests/fuzz/corpus/$h" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $h FAILED after $((SECONDS - start)) s; the input is in $artifacts (log: $log)"
    exit 1
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz: $h: $executions executions in $((SECONDS - start)) s: no crash, hang or leak"
done
