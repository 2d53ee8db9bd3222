#!/usr/bin/env bash
# Does a working set fit the GPU's L2 equally well wherever it lies? gpu/bench/l2_layout.cu under
# Nsight Compute, merged by l2_layout_merge.py into one record file.
# Run: gpu/bench/l2_layout.sh OUTDIR     (writes OUTDIR/l2-layout.json; needs nvcc and ncu)
set -euo pipefail
out=${1:?usage: l2_layout.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o "$out/l2_layout" "$here/l2_layout.cu"
ncu --clock-control none --cache-control all -k layout_kernel \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$out/l2-layout-ncu.csv" "$out/l2_layout" > "$out/l2-layout-runs.txt"
PYTHONPATH="$here" python3 "$here/l2_layout_merge.py" "$out/l2-layout-runs.txt" "$out/l2-layout-ncu.csv" \
    "$out/l2-layout.json" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
