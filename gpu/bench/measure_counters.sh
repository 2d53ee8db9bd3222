#!/usr/bin/env bash
# DRAM and L2 traffic for the records of a measurement file, from Nsight Compute: the same sweep
# is launched again with --profile-pass (each record once, between two hbmlab_marker kernels),
# ncu reads the counters of every hbmlab kernel, and merge_counters.py sums them per record.
# Run: gpu/bench/measure_counters.sh MEASUREMENT.json NCU.csv [hbmlab measure args of that sweep...]
# ncu flushes the L2 before each profiled kernel (--cache-control all), like the timed runs; writes
# still dirty in L2 when a kernel ends are written back later and are not in its dram_write_bytes.
set -euo pipefail
file=${1:?usage: measure_counters.sh MEASUREMENT.json NCU.csv [measure args]}
csv=${2:?usage: measure_counters.sh MEASUREMENT.json NCU.csv [measure args]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
hbmlab=${HBMLAB:-hbmlab}
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
ncu --clock-control none --cache-control all --metrics "$metrics" \
    -k 'regex:hbmlab_marker|flash1_kernel|flash2_kernel|qk_kernel|softmax_kernel|pv_kernel' \
    --csv --page raw --print-units base --log-file "$csv" \
    "$hbmlab" measure "$@" --profile-pass
python3 "$here/merge_counters.py" "$file" "$csv"
