#!/usr/bin/env bash
# The L2's two partitions: which SMs sit by which (latency), and how much of a footprint read over
# and over stays in the L2 when all SMs, or one side's SMs, read it, cyclically or in random order.
# Run: gpu/bench/l2_partition.sh OUTDIR   (writes OUTDIR/l2-partition.json and .txt; needs nvcc, ncu)
#      BIN=prebuilt/l2_partition gpu/bench/l2_partition.sh OUTDIR   (no nvcc on the GPU machine)
#      SDPA=1 adds PyTorch's cuDNN forward at d = 128, N = 32K, H = 8 under the same counters;
#      HBMLAB=build/hbmlab adds hbmlab's flash2 at d = 128, N = 64K, H = 4, causal, 64 × 64 (a CUDA build).
set -euo pipefail
out=${1:?usage: l2_partition.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/ncu"
bin=${BIN:-$out/l2_partition}
[[ -n "${BIN:-}" ]] || nvcc -O3 -arch=sm_90 -o "$bin" "$here/l2_partition.cu"
passes=${PASSES:-6}
footprints=${FOOTPRINTS:-8 16 20 24 28 32 36 40 44 48 56 64 80}
# Which L2 counters this ncu knows: the near partition's lookups (srcunit tex) and, where the chip
# has them, the requests that crossed between the partitions (srcunit ltcfabric).
ncu --query-metrics --chip gh100 | grep -o '^lts__t_sectors_srcunit_[a-z_]*' | sort -u > "$out/lts-metrics.txt" || true
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum
for m in lts__t_sectors_srcunit_tex_op_read_lookup_hit lts__t_sectors_srcunit_tex_op_read_lookup_miss \
         lts__t_sectors_srcunit_ltcfabric lts__t_sectors_srcunit_ltcfabric_lookup_hit \
         lts__t_sectors_srcunit_ltcfabric_lookup_miss; do
  grep -qx "$m" "$out/lts-metrics.txt" && metrics+=",$m.sum"
done
echo "metrics: $metrics"
"$bin" map "$out/sides.txt" "$out/lines.txt" | tee "$out/map.txt"
: > "$out/runs.txt"
for mode in ${MODES:-all cross side0 side1 random}; do
  ncu --clock-control none --cache-control all -k regex:pass_kernel --metrics "$metrics" --csv --page raw \
      --print-units base --log-file "$out/ncu/$mode.csv" "$bin" sweep "$out/sides.txt" "$mode" "$passes" $footprints \
      | grep '^run ' | tee -a "$out/runs.txt"
done
if [[ -n "${SDPA:-}" ]]; then
  ncu --clock-control none --cache-control all -k regex:fprop --launch-skip 1 --launch-count 1 --metrics "$metrics" \
      --csv --page raw --print-units base --log-file "$out/ncu/sdpa.csv" python3 "$here/l2_partition_sdpa.py" || true
fi
if [[ -n "${HBMLAB:-}" ]]; then
  ncu --clock-control none --cache-control all -k regex:flash2_kernel --launch-count 1 --metrics "$metrics" \
      --csv --page raw --print-units base --log-file "$out/ncu/flash2.csv" "$HBMLAB" measure --algo flash2 \
      --seq-len 65536 --head-dim 128 --batch 1 --heads 4 --causal yes --blocks 64x64 --profile-pass || true
fi
python3 "$here/l2_partition_merge.py" "$out" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    | tee "$out/l2-partition.txt"
