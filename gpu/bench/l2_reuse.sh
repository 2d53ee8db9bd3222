#!/usr/bin/env bash
# How long a line survives in the GPU's L2: gpu/bench/l2_reuse.cu under Nsight Compute, one launch
# per reuse distance, merged by l2_reuse_merge.py into one record file.
# Run: gpu/bench/l2_reuse.sh OUTDIR     (writes OUTDIR/l2-reuse.json; needs nvcc and ncu)
#      PATTERNS=once ONCE_LAGS="16 18 20 22 24" gpu/bench/l2_reuse.sh OUTDIR
#          (only the listed patterns, comma-separated; other lags for "once", e.g. for a larger L2)
# Nine patterns (see l2_reuse.cu): "once" re-reads each chunk once, on another SM; "same-sm" re-reads
# it on the SM that first read it; "four-times" re-reads it four times, lag apart, on another SM;
# "other-half" and "same-half" re-read it once on an SM chosen by %smid in the other L2 half or in
# the same GPC; "once+writes" is "once" with a new 4 KiB chunk stored by every CTA each step, and
# "once+stream" with a new 4 KiB chunk read by every CTA each step and never again;
# "four-same-half" re-reads four times from the same GPC, "four-both-halves" four times from the
# other L2 half and the same GPC in turn (does a line read from both halves take room in both?).
set -euo pipefail
out=${1:?usage: l2_reuse.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/ncu"
bin="$out/l2_reuse"
nvcc -O3 -arch=sm_90 -o "$bin" "$here/l2_reuse.cu"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum
: > "$out/runs.txt"
patterns=${PATTERNS:-once,same-sm,four-times,other-half,same-half,four-same-half,four-both-halves,once+writes,once+stream}
run() {  # NAME PATTERN CHUNK LAG REUSES SHIFT ITERATIONS [WRITE [STREAM]]
  local name=$1 pattern=$2
  shift 2
  [[ ",$patterns," == *",$pattern,"* ]] || return 0
  local info
  info=$(ncu --clock-control none --cache-control all -k reuse_kernel --metrics "$metrics" --csv --page raw \
             --print-units base --log-file "$out/ncu/$name.csv" "$bin" "$@" | grep '^ctas')
  echo "$name $pattern $info" | tee -a "$out/runs.txt"
}
for lag in ${ONCE_LAGS:-2 4 6 7 8 9 10 11 12 13 14 15 16 18 20 24 28}; do run "A$lag" once 4096 "$lag" 1 -1 600; done
for lag in 6 8 10 12 14 16 20; do run "S$lag" same-sm 4096 "$lag" 1 0 600; done
for lag in 2 4 6 8 9 10 11 12 14 16; do run "H$lag" four-times 2048 "$lag" 4 -1 800; done
for lag in 6 8 10 12 13 14 15 16 18 20 24; do run "X$lag" other-half 4096 "$lag" 1 -2 600; done
for lag in 6 8 10 12 13 14 15 16 18 20 24; do run "G$lag" same-half 4096 "$lag" 1 -3 600; done
for lag in 2 4 6 8 9 10 11 12 14 16; do run "F$lag" four-same-half 2048 "$lag" 4 -3 800; done
for lag in 2 4 6 8 9 10 11 12 14 16; do run "B$lag" four-both-halves 2048 "$lag" 4 -4 800; done
for lag in 4 6 8 9 10 11 12 13 14 16; do run "W$lag" once+writes 4096 "$lag" 1 -1 600 4096; done
for lag in 4 6 8 9 10 11 12 13 14 16; do run "R$lag" once+stream 4096 "$lag" 1 -1 600 0 4096; done
python3 "$here/l2_reuse_merge.py" "$out/runs.txt" "$out/ncu" "$out/l2-reuse.json" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
