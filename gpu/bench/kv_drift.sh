#!/usr/bin/env bash
# Do the CTAs' K/V sweeps of a causal forward drift apart on the GPU (gpu/bench/kv_drift.cu says how):
# every sweep once plainly (its timestamps: tile times, drift, reuse distances; raw records of the
# sweeps with nothing set aside in OUTDIR/raw), then again under Nsight Compute's DRAM counters, and
# kv_drift_merge.py joins the two beside cuDNN's forward at the same shape.
# Run: gpu/bench/kv_drift.sh OUTDIR              (builds with nvcc)
#      BIN=prebuilt/kv_drift gpu/bench/kv_drift.sh OUTDIR   (writes OUTDIR/h100-kv-drift.json, kv-drift.txt,
#      kv-drift-ncu.csv and raw/*.bin; `kv_drift analyse raw/LABEL.bin` re-reads one)
#      KV_DRIFT_ARGS="--orders A,B --works balanced" RAW_ARGS="--raw-every LABEL" …: other sweeps (kv_drift.cu)
set -uo pipefail
out=${1:?usage: kv_drift.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/raw" "$out/ncu"
bin=${BIN:-$out/kv_drift}
[[ -n "${BIN:-}" ]] || nvcc -O3 -std=c++17 -arch=sm_90 -o "$bin" "$here/kv_drift.cu" || exit 1
# shellcheck disable=SC2086  # KV_DRIFT_ARGS and RAW_ARGS are lists of words
"$bin" run "$out" --raw ${RAW_ARGS:-} ${KV_DRIFT_ARGS:-} > "$out/kv-drift-runs.txt" 2>&1
echo "plain pass rc=$?"
ncu --clock-control none --cache-control none -k regex:kv_sweep \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$out/kv-drift-ncu.csv" \
    "$bin" run "$out/ncu" ${KV_DRIFT_ARGS:-} > "$out/kv-drift-ncu-runs.txt" 2>&1
echo "ncu pass rc=$?"
python3 "$here/kv_drift_merge.py" "$out" | tee "$out/kv-drift.txt"
cat "$out/kv-drift-runs.txt" >> "$out/kv-drift.txt"
