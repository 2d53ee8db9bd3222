#!/usr/bin/env bash
# hbmlab's forward kernels on few (batch, head) pairs, where Q, K, V and O of the whole problem fit the
# L2 (B*H = 4..32, N = 2K..8K): the regime h100.json's runs (B*H*N = 262144, B*H >= 32) never reach.
# One file, assets/measurements/h100-few-heads.json, with CUPTI DRAM counters per record, L2 flushed.
# Run: BIN=build gpu/bench/few_heads.sh OUTDIR   (BIN: the folder holding hbmlab; LIB: its shared libraries)
set -uo pipefail
out=${1:?usage: few_heads.sh OUTDIR}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
mkdir -p "$out"
parts=()
for heads in 4 8 16 32; do
  echo "== B=1 H=$heads"
  "$BIN/hbmlab" measure --algo standard,flash1,flash2,flash3 --batch 1 --heads "$heads" \
    --seq-len 2048,4096,8192 --head-dim 64,128 --causal both --reps 5 --warmup 2 \
    --out "$out/few-heads-h$heads.json" > "$out/few-heads-h$heads.log" 2>&1
  echo "rc=$? $(grep -c 'ok ' "$out/few-heads-h$heads.log") ok"; grep -E "FAIL|rror" "$out/few-heads-h$heads.log" | head -3
  parts+=("$out/few-heads-h$heads.json")
done
python3 - "$out/h100-few-heads.json" "${parts[@]}" <<'PY'
import json, sys
files = [json.load(open(f)) for f in sys.argv[2:]]
merged = dict(files[0])
merged["records"] = [r for f in files for r in f["records"]]
merged["method"] = dict(merged["method"], runs="gpu/bench/few_heads.sh: B = 1, H = 4, 8, 16, 32, one measure run each")
json.dump(merged, open(sys.argv[1], "w"), indent=1)
print(len(merged["records"]), "records in", sys.argv[1])
PY
