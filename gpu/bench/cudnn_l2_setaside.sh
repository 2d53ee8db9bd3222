#!/usr/bin/env bash
# cuDNN's forward at the shapes the engine's L2 model misses, with 0 to 30 MiB of the L2 set aside for
# persisting lines (gpu/bench/cudnn_l2_setaside.py says how), under Nsight Compute's DRAM counters.
# Run: gpu/bench/cudnn_l2_setaside.sh OUTDIR   (OUTDIR/h100-cudnn-l2-setaside.json, cudnn-l2-setaside.txt)
set -uo pipefail
out=${1:?usage: cudnn_l2_setaside.sh OUTDIR}
parts=all
source "$(dirname "$0")/device_env.sh"
metrics=$(python3 -c "import sys; sys.path.insert(0, '$here'); import cudnn_l2_setaside as c; print(','.join(c.METRICS))")
ncu --clock-control none --cache-control none --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
    --csv --page raw --print-units base --log-file "$out/cudnn-l2-setaside-ncu.csv" \
    python3 "$here/cudnn_l2_setaside.py" --ncu-pass > "$out/cudnn-l2-setaside-ncu.log" 2>&1
echo "cudnn ncu rc=$?"
sizes=$(sed -n 's/.*set-asides (MB): \[\(.*\)\]/\1/p' "$out/cudnn-l2-setaside-ncu.log" | tr -d ' ')
granted=$(sed -n 's/^granted (bytes): //p' "$out/cudnn-l2-setaside-ncu.log")
python3 "$here/cudnn_l2_setaside.py" --merge "$out/cudnn-l2-setaside-ncu.csv" "$out/h100-cudnn-l2-setaside.json" \
    --sizes "$sizes" --granted "$granted" | tee "$out/cudnn-l2-setaside.txt"
cat "$out/cudnn-l2-setaside-ncu.log" >> "$out/cudnn-l2-setaside.txt"
