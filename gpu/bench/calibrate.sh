#!/usr/bin/env bash
# Calibration run for hbmlab's timing engine on the GPU at hand: timings (copy bandwidth, DRAM/L2
# latency, GEMM rate, torch SDPA backends), then the SDPA launches again under Nsight Compute for
# DRAM/L2 traffic and launch shapes, merged into one JSON.
# Run: gpu/bench/calibrate.sh OUTDIR     (writes OUTDIR/calibration.json, OUTDIR/calibration-ncu.csv)
set -euo pipefail
out=${1:?usage: calibrate.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 "$here/calibrate_h100.py" --out "$out/calibration-timing.json" ${CALIB_SKIP:+--skip $CALIB_SKIP}
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__registers_per_thread,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers
ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
    --csv --page raw --print-units base --log-file "$out/calibration-ncu.csv" \
    python3 "$here/calibrate_h100.py" --ncu-pass
python3 "$here/merge_ncu.py" "$out/calibration-timing.json" "$out/calibration-ncu.csv" "$out/calibration.json"
