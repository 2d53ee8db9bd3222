#!/usr/bin/env bash
# Shared-memory wavefronts per SASS instruction of hbmlab's kernels (Nsight Compute's SourceCounters),
# to see which accesses take more wavefronts than their bytes / 128 (bank conflicts) or fewer (a
# broadcast): the backward kernel (d = 128, 64 × 128), the decode split kernel (the h100-onchip-cupti
# record's shape), flash1 and standard (N = 1024, d = 64). One launch of each kernel, small shapes:
# the per-instruction wavefronts are those of every (i, j) step, whatever the grid.
# Run: HBMLAB=build/hbmlab gpu/bench/smem_source_ncu.sh OUTDIR
#   writes OUTDIR/<name>.ncu-rep and OUTDIR/<name>-source.csv (ncu --page source --print-source sass).
set -uo pipefail
out=${1:?usage: smem_source_ncu.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
mkdir -p "$out"
profile() {  # name kernel-regex launches hbmlab-measure-arguments...
  local name=$1 kernels=$2 count=$3
  shift 3
  ncu --section SourceCounters --section MemoryWorkloadAnalysis_Tables --clock-control none -k "regex:$kernels" \
      -c "$count" -f -o "$out/$name" "$hbmlab" measure --dtype fp16 --profile-pass "$@" > "$out/$name-run.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name-source.csv" 2> "$out/$name-source.err"
  ncu -i "$out/$name.ncu-rep" --page details --csv > "$out/$name-details.csv" 2>&1
}
profile backward flash2_backward_kernel 1 --algo flash2 --pass backward --seq-len 1024 --head-dim 128 --heads 4 --batch 1 \
    --causal no
profile decode decode_split_kernel 1 --algo flash-decoding --seq-len 8192 --query-len 1 --heads 32 --kv-heads 8 \
    --head-dim 128 --splits 16 --batch 1 --causal no
profile flash1-standard 'flash1_kernel|qk_kernel|softmax_kernel|pv_kernel' 4 --algo flash1,standard --seq-len 1024 \
    --head-dim 64 --heads 1 --batch 1 --causal no
