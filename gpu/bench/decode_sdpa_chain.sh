#!/usr/bin/env bash
# PyTorch's decode split kernel with 1 to 18 K/V blocks a CTA under Nsight Compute
# (gpu/bench/decode_sdpa_chain.py says which shapes), merged into OUTDIR/h100-decode-sdpa-chain.json
# for `hbmlab validate --measurements`.
# Run: gpu/bench/decode_sdpa_chain.sh OUTDIR
set -euo pipefail
out=${1:?usage: decode_sdpa_chain.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__registers_per_thread,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers
ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
    --csv --page raw --print-units base --log-file "$out/decode-sdpa-chain-ncu.csv" \
    python3 "$here/decode_sdpa_chain.py" --ncu-pass > "$out/decode-sdpa-chain-ncu.log" 2>&1
python3 "$here/decode_sdpa_chain.py" --merge "$out/decode-sdpa-chain-ncu.csv" "$out/h100-decode-sdpa-chain.json" \
    | tee "$out/decode-sdpa-chain.txt"
