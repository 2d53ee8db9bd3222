#!/usr/bin/env bash
# Do lines a power of two apart alias in the GPU's L2? gpu/bench/l2_alias.cu under Nsight Compute,
# merged by l2_alias_merge.py into one record file.
# Run: gpu/bench/l2_alias.sh OUTDIR     (writes OUTDIR/l2-alias.json; needs nvcc and ncu)
set -euo pipefail
out=${1:?usage: l2_alias.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o "$out/l2_alias" "$here/l2_alias.cu"
ncu --clock-control none --cache-control all -k alias_kernel \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$out/l2-alias-ncu.csv" "$out/l2_alias" > "$out/l2-alias-runs.txt"
PYTHONPATH="$here" python3 "$here/l2_alias_merge.py" "$out/l2-alias-runs.txt" "$out/l2-alias-ncu.csv" \
    "$out/l2-alias.json" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
