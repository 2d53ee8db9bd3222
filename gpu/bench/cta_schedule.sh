#!/usr/bin/env bash
# The CTA schedule of hbmlab's flash2 as the GPU runs it, for the configurations where the engine's
# DRAM reads are checked hardest (d = 128 causal, 64K tokens), with PyTorch's K/V order.
# Run: gpu/bench/cta_schedule.sh OUTDIR     (one OUTDIR/NAME.json per configuration)
#      then gpu/bench/cta_schedule_compare.py --gpu h100-sxm OUTDIR/*.json
# BIN=path/to/hbmlab_cta_schedule (default build/gpu/hbmlab_cta_schedule).
set -uo pipefail
out=${1:?usage: cta_schedule.sh OUTDIR}
bin=${BIN:-build/gpu/hbmlab_cta_schedule}
mkdir -p "$out"
failed=0
run() {
  local name=$1
  shift
  echo "== $name"
  timeout 120 "$bin" "$@" --out "$out/$name.json" || failed=1
}
run d128-causal-512-desc --seq-len 512   --head-dim 128 --batch 32 --heads 16 --causal --kv-descending --blocks 128x64
run d128-causal-2k-desc  --seq-len 2048  --head-dim 128 --batch 8  --heads 16 --causal --kv-descending --blocks 128x64
run d128-causal-4k-desc  --seq-len 4096  --head-dim 128 --batch 4  --heads 16 --causal --kv-descending --blocks 128x64
run d128-causal-4k-asc   --seq-len 4096  --head-dim 128 --batch 4  --heads 16 --causal --blocks 128x64
run d128-causal-8k-desc  --seq-len 8192  --head-dim 128 --batch 2  --heads 16 --causal --kv-descending --blocks 128x64
run d128-full-4k-desc    --seq-len 4096  --head-dim 128 --batch 4  --heads 16 --kv-descending --blocks 128x64
run d64-causal-16k-desc  --seq-len 16384 --head-dim 64  --batch 1  --heads 16 --causal --kv-descending --blocks 128x128
run d64-full-64k-desc    --seq-len 65536 --head-dim 64  --batch 1  --heads 4  --kv-descending --blocks 128x128
run d64-causal-64k-desc  --seq-len 65536 --head-dim 64  --batch 1  --heads 4  --causal --kv-descending --blocks 128x128
run d128-causal-64k-desc --seq-len 65536 --head-dim 128 --batch 1  --heads 4  --causal --kv-descending --blocks 128x64
exit $failed
