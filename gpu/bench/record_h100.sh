#!/usr/bin/env bash
# The recorded H100 measurements: the kernel sweep with CUPTI counters (assets/measurements/h100.json),
# the flash2-vs-torch speed table, and the CUPTI-vs-ncu counter cross-check, in one device call.
# Run: BIN=build gpu/bench/record_h100.sh OUTDIR [sweep,standard,flash2,speed,xcheck]   (BIN: the folder holding hbmlab)
set -uo pipefail
out=${1:?usage: record_h100.sh OUTDIR}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
parts=${2:-sweep,speed,xcheck}
has() { [[ ",$parts," == *",$1,"* ]]; }
mkdir -p "$out"
if has sweep; then
echo "== sweep"
"$BIN/hbmlab" measure --algo standard,flash1,flash2 --seq-len 512,1024,2048,4096,8192,16384,32768,65536 \
  --head-dim 64,128 --causal both --blocks all --max-n-flash1 4096 --max-n-standard 16384 --reps 30 \
  --out "$out/h100.json" > "$out/h100.log" 2>&1
echo "rc=$?"; grep -c "ok " "$out/h100.log"; grep -E "FAIL|error" "$out/h100.log" | head
fi
if has standard; then
echo "== standard alone (its records replace the sweep's standard records in h100.json), and ncu per kernel"
"$BIN/hbmlab" measure --algo standard --seq-len 512,1024,2048,4096,8192,16384 --head-dim 64,128 --causal both \
  --blocks all --max-n-standard 16384 --reps 30 --stress --out "$out/standard.json" > "$out/standard.log" 2>&1
echo "rc=$?"; grep -c "ok " "$out/standard.log"
ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  "$BIN/hbmlab" measure --algo standard --seq-len 1024,4096 --head-dim 64,128 --causal no --blocks all \
  --profile-pass > "$out/standard-ncu.csv" 2> "$out/standard-ncu.err"
fi
if has flash2; then
echo "== flash2 alone (its records replace the sweep's flash2 records in h100.json)"
"$BIN/hbmlab" measure --algo flash2 --seq-len 512,1024,2048,4096,8192,16384,32768,65536 --head-dim 64,128 \
  --causal both --blocks all --reps 30 --out "$out/flash2.json" > "$out/flash2.log" 2>&1
echo "rc=$?"; grep -c "ok " "$out/flash2.log"; grep -E "FAIL|error" "$out/flash2.log" | head
fi
if has speed; then
echo "== speed: hbmlab flash2 and torch SDPA, same shapes (B*H*N = 262144, H = 16), fp16"
"$BIN/hbmlab" measure --algo flash2 --seq-len 2048,4096,8192,16384 --head-dim 64,128 --blocks all \
  --reps 30 --counters none --out "$out/speed-hbmlab.json" > "$out/speed-hbmlab.log" 2>&1
python3 "$here/calibrate_h100.py" --skip copy,chase,gemm --seq-lens 2048,4096,8192,16384 \
  --backends flash,cudnn --out "$out/speed-torch.json" > "$out/speed-torch.log" 2>&1
python3 "$here/speed_table.py" "$out/speed-hbmlab.json" "$out/speed-torch.json" | tee "$out/speed-table.md"
fi
if has xcheck; then
echo "== CUPTI vs ncu"
args=(--algo standard,flash1,flash2 --seq-len 1024,4096 --head-dim 64,128 --causal both --reps 10)
"$BIN/hbmlab" measure "${args[@]}" --out "$out/xcheck-cupti.json" > "$out/xcheck-cupti.log" 2>&1
cp "$out/xcheck-cupti.json" "$out/xcheck-ncu.json"
HBMLAB="$BIN/hbmlab" "$here/measure_counters.sh" "$out/xcheck-ncu.json" "$out/xcheck-ncu.csv" "${args[@]}" \
  > "$out/xcheck-ncu.log" 2>&1
python3 "$here/xcheck_counters.py" "$out/xcheck-cupti.json" "$out/xcheck-ncu.json" > "$out/xcheck.md"
tail -1 "$out/xcheck.md"
fi
