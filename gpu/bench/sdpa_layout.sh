#!/usr/bin/env bash
# DRAM reads of PyTorch's SDPA flash backend for the same attention in three memory layouts
# (gpu/bench/sdpa_layout.py), under Nsight Compute, merged into one record file.
# Run: gpu/bench/sdpa_layout.sh OUTDIR     (writes OUTDIR/sdpa-layout.json and OUTDIR/sdpa-layout-ncu.csv)
set -euo pipefail
out=${1:?usage: sdpa_layout.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" \
    --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum,launch__grid_size \
    --csv --page raw --print-units base --log-file "$out/sdpa-layout-ncu.csv" \
    python3 "$here/sdpa_layout.py" --run > "$out/sdpa-layout-run.log"
python3 "$here/sdpa_layout.py" --merge "$out/sdpa-layout-ncu.csv" "$out/sdpa-layout.json" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
