#!/usr/bin/env bash
# One single-launch-per-case L2 microbenchmark under Nsight Compute: builds NAME.cu, profiles every
# launch of KERNEL in one run of it, and merges the counters with NAME_merge.py into one record file.
# Run: gpu/bench/l2_micro.sh NAME KERNEL OUTDIR   (writes OUTDIR/<NAME with - for _>.json; needs nvcc and ncu)
set -euo pipefail
name=${1:?usage: l2_micro.sh NAME KERNEL OUTDIR} kernel=${2:?usage: l2_micro.sh NAME KERNEL OUTDIR}
out=${3:?usage: l2_micro.sh NAME KERNEL OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
stem=${name//_/-}
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o "$out/$name" "$here/$name.cu"
ncu --clock-control none --cache-control all -k "$kernel" \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$out/$stem-ncu.csv" "$out/$name" > "$out/$stem-runs.txt"
PYTHONPATH="$here" python3 "$here/${name}_merge.py" "$out/$stem-runs.txt" "$out/$stem-ncu.csv" \
    "$out/$stem.json" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
