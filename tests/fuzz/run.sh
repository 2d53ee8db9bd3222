#!/usr/bin/env bash
# Fuzzes the harnesses of build-debug/ (`make fuzz` builds them and calls this) for SECONDS each:
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]   (default 30 s, all four)
# HBMLAB_FUZZ_JOBS=N fuzzes N harnesses at a time, one core each (default 1: one after another;
# `make fuzz` passes JOBS). HBMLAB_FUZZ_RUNS=N stops each harness after N executions instead
# (SECONDS still caps it). HBMLAB_FUZZ_BUILD names another build folder (default build-debug).
# Fails on a crash, sanitizer finding, leak, escaped exception, input slower than 10 s or run over
# 2 GiB; no harness is started after one has failed. The input that did it is left in
# build-debug/fuzz-artifacts/HARNESS/: once the bug is fixed, add it to tests/fuzz/corpus/HARNESS/,
# where CTest replays it from then on. Inputs that reach new code collect in
# build-debug/fuzz-corpus/HARNESS/ (outside the repository). Each harness starts from its corpus
# and from the files hbmlab ships of its kind (shipped_of; the same folders CMakeLists.txt replays).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(scenario gpu_spec measurements block_mask)
build=${HBMLAB_FUZZ_BUILD:-build-debug}
jobs=${HBMLAB_FUZZ_JOBS:-1}
case $jobs in
  ''|*[!0-9]*|0) echo "fuzz: HBMLAB_FUZZ_JOBS must be a whole number above 0, not '$jobs'" >&2; exit 2 ;;
esac
runs=()
[ -n "${HBMLAB_FUZZ_RUNS:-}" ] && runs=(-runs="$HBMLAB_FUZZ_RUNS")

dict_of() {
  case $1 in
    scenario|gpu_spec) echo toml.dict ;;
    measurements) echo json.dict ;;
    block_mask) echo mask.dict ;;
    *) return 1 ;;
  esac
}
# The folders of shipped files that seed a harness beside its corpus (read only: libFuzzer writes
# what it finds into the first folder it is given, build-debug/fuzz-corpus/HARNESS).
shipped_of() {
  case $1 in
    scenario) echo scenarios/lessons scenarios/workloads ;;
    gpu_spec) echo scenarios/gpus ;;
    *) ;;
  esac
}
for h in "${harnesses[@]}"; do
  dict_of "$h" >/dev/null ||
    { echo "fuzz: unknown harness '$h' (scenario, gpu_spec, measurements, block_mask)" >&2; exit 2; }
done

# One harness: its line when it finds nothing, the end of its log and a non-zero status when it does.
fuzz_one() {
  local h=$1 start=$SECONDS executions
  local work=$build/fuzz-corpus/$h artifacts=$build/fuzz-artifacts/$h/ log=$build/fuzz-$h.log
  mkdir -p "$work" "$artifacts"
  local seeds
  read -r -a seeds <<<"$(shipped_of "$h")"
  [ -d "tests/fuzz/corpus/$h" ] && seeds=("tests/fuzz/corpus/$h" "${seeds[@]}")
  if ! "$build/tests/fuzz/fuzz_$h" -max_total_time="$seconds" "${runs[@]}" -timeout=10 -rss_limit_mb=2048 \
       -dict="tests/fuzz/$(dict_of "$h")" -artifact_prefix="$artifacts" -print_final_stats=1 \
       "$work" "${seeds[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $h FAILED after $((SECONDS - start)) s; the input is in $artifacts (log: $log)"
    return 1
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz: $h: $executions executions in $((SECONDS - start)) s: no crash, hang or leak"
}

# JOBS harnesses at a time; each batch is waited for whole before the next starts.
for ((i = 0; i < ${#harnesses[@]}; i += jobs)); do
  pids=()
  for h in "${harnesses[@]:i:jobs}"; do
    fuzz_one "$h" &
    pids+=($!)
  done
  failed=0
  for p in "${pids[@]}"; do
    wait "$p" || failed=1
  done
  [ $failed -eq 0 ] || exit 1
done
