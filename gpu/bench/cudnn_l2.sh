#!/usr/bin/env bash
# cuDNN's forward around d = 128, N = 64K, H = 4, causal (gpu/bench/cudnn_l2.py says which shapes)
# under Nsight Compute with the L2's per-partition counters, and hbmlab's flash3 and flash2 at that
# shape under the same counters (a CUDA build of hbmlab in BIN, its libraries in LIB).
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/cudnn_l2.sh OUTDIR   (OUTDIR/h100-cudnn-l2.json, cudnn-l2.txt;
#      h200-cudnn-l2.json on an H200)
set -uo pipefail
out=${1:?usage: cudnn_l2.sh OUTDIR}
parts=all
source "$(dirname "$0")/device_env.sh"
metrics=$(python3 -c "import sys; sys.path.insert(0, '$here'); import cudnn_l2; print(','.join(cudnn_l2.L2_METRICS))")
ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
    --csv --page raw --print-units base --log-file "$out/cudnn-l2-ncu.csv" \
    python3 "$here/cudnn_l2.py" --ncu-pass > "$out/cudnn-l2-ncu.log" 2>&1
echo "cudnn ncu rc=$?"
extra=()
shape=(--seq-len 65536 --head-dim 128 --batch 1 --heads 4 --causal yes --profile-pass)
if [[ -x "$BIN/hbmlab" ]]; then
  for algo in flash3 flash2; do
    blocks=(); [[ $algo == flash2 ]] && blocks=(--blocks 64x64)
    timeout 120 ncu --clock-control none --cache-control all -k regex:"${algo}_kernel|hbmlab_marker" --metrics "$metrics" \
        --csv --page raw --print-units base --log-file "$out/hbmlab-$algo-ncu.csv" \
        "$BIN/hbmlab" measure --algo $algo "${shape[@]}" "${blocks[@]}" > "$out/hbmlab-$algo.log" 2>&1
    echo "hbmlab $algo ncu rc=$?"
    extra+=(--hbmlab $algo "$out/hbmlab-$algo-ncu.csv")
  done
fi
gpu=h100; nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && gpu=h200
python3 "$here/cudnn_l2.py" --merge "$out/cudnn-l2-ncu.csv" "$out/$gpu-cudnn-l2.json" "${extra[@]}" | tee "$out/cudnn-l2.txt"
