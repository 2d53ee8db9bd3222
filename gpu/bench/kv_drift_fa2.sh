#!/usr/bin/env bash
# FlashAttention-2's grid under a causal K/V sweep (gpu/bench/kv_drift.cu, --grid fa2): at d = 128,
# B·H = 32, N = 8192 and B·H = 16, N = 16384, 128 × 128 and 128 × 64 K/V tiles, K/V descending and
# ascending, twice each, once plainly (tile stamps: OUTDIR/kv-drift-fa2.jsonl, -runs.txt, raw records
# in OUTDIR/raw) and once under Nsight Compute's DRAM counters (OUTDIR/ncu-hBH-nN-kvROWS.csv). On the GPU machine; then, here,
# gpu/bench/kv_drift_fa2_merge.py OUTDIR sets them beside the engine's L2 on the same stamps and the engine.
# Run: gpu/bench/kv_drift_fa2.sh OUTDIR                  (builds with nvcc)
#      BIN=prebuilt/kv_drift gpu/bench/kv_drift_fa2.sh OUTDIR
set -uo pipefail
out=${1:?usage: kv_drift_fa2.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/raw" "$out/ncu/raw"
bin=${BIN:-$out/kv_drift}
[[ -n "${BIN:-}" ]] || nvcc -O3 -std=c++17 -arch=sm_90 -o "$bin" "$here/kv_drift.cu" || exit 1
shapes=("32 8192 128" "16 16384 128" "32 8192 64" "16 16384 64")
for shape in "${shapes[@]}"; do
  read -r heads seq kv <<<"$shape"
  "$bin" run "$out" --grid fa2 --heads "$heads" --seq "$seq" --kv-rows "$kv" --reps 2 2>&1 | tee -a "$out/kv-drift-fa2-runs.txt"
done
for shape in "${shapes[@]}"; do
  read -r heads seq kv <<<"$shape"
  ncu --clock-control none --cache-control none -k regex:kv_fa2 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
      --csv --page raw --print-units base --log-file "$out/ncu-h$heads-n$seq-kv$kv.csv" \
      "$bin" run "$out/ncu" --grid fa2 --heads "$heads" --seq "$seq" --kv-rows "$kv" --reps 2 \
      > "$out/ncu-runs-h$heads-n$seq-kv$kv.txt" 2>&1
  echo "ncu pass h$heads n$seq kv$kv rc=$?"
done
