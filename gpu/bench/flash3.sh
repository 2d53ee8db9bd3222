#!/usr/bin/env bash
# flash3 on the H100 in one device call: the SASS (HGMMA, registers), the GPU tests of every rung,
# compute-sanitizer, and the speed table (each rung beside flash2 and PyTorch SDPA's flash and cuDNN
# backends). Expects hbmlab and hbmlab_tests_gpu built elsewhere in BIN, their shared libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/flash3.sh OUTDIR [parts: sass,test,san,speed]
set -uo pipefail
out=${1:?usage: flash3.sh OUTDIR [parts]}
parts=${2:-sass,test,san,speed}
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
has() { [[ ",$parts," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if has sass; then
  echo "== SASS: wgmma (HGMMA) and bulk copies per flash3 kernel; registers"
  cuobjdump -sass "$BIN/hbmlab" > "$out/sass.txt" 2>&1
  awk '/Function : .*flash3_kernel/ {name=$3} name && /HGMMA/ {h[name]++} name && /UTMALDG/ {l[name]++}
       name && /UTMASTG/ {s[name]++} name && /(LDL|STL)/ {x[name]++}
       END {for (n in h) printf "HGMMA %3d UTMALDG %2d UTMASTG %d LDL/STL %d  %s\n", h[n], l[n], s[n], x[n], n}' \
    "$out/sass.txt" | c++filt | sed -E 's/hbmlab::gpu::\(anonymous namespace\)::flash3_kernel/flash3/' | sort -k9 | cut -c1-150
  cuobjdump --dump-resource-usage "$BIN/hbmlab" 2>&1 | grep -A1 "flash3_kernel" | grep -oE "REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+" | sort | uniq -c
fi
if has test; then
  echo "== GPU tests: flash3's ladder, then every compiled shape"
  timeout 400 "$BIN/hbmlab_tests_gpu" "[flash3]" 2>&1 | tail -30  # with the masked and backward ones: over 150 s
  timeout 150 "$BIN/hbmlab_tests_gpu" "every compiled kernel shape matches the fp64 reference on ragged N" 2>&1 | tail -5
  timeout 150 "$BIN/hbmlab_tests_gpu" "default shapes survive the stress inputs" 2>&1 | tail -5
fi
if has san; then
  small=(--algo flash3 --seq-len 200 --tokens 400 --heads 2 --check-only --dtype fp16,bf16 --causal both)
  for v in ${SAN_VERSIONS:-1 2 3 4}; do
    for tool in memcheck racecheck synccheck; do
      printf "== compute-sanitizer %s, v%s: " $tool $v
      HBMLAB_FLASH3_VERSION=$v timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure "${small[@]}" \
        > "$out/san-$tool-v$v.log" 2>&1
      echo "rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-$tool-v$v.log" | tail -1)"
      if [ "$v" = 4 ]; then  # v4's causal walk with more pairs than CTAs (150 over 132 at Br = 128)
        printf "== compute-sanitizer %s, v4, causal pairs: " $tool
        HBMLAB_FLASH3_VERSION=4 timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure --algo flash3 \
          --seq-len 600 --batch 30 --heads 2 --causal yes --blocks all --check-only > "$out/san-$tool-v4-pairs.log" 2>&1
        echo "rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-$tool-v4-pairs.log" | tail -1)"
      fi
    done
  done
  cat "$out"/san-*.log > "$out/sanitizer.log"
fi
if has speed; then
  echo "== speed: B*N = 16K tokens, H = 16 at d = 128, 32 at d = 64; fp16; L2 flushed"
  common=(--seq-len ${SEQ_LENS:-2048,4096,8192,16384} --causal both --reps 30 --counters none)
  for d in 128 64; do
    heads=$([ $d = 128 ] && echo 16 || echo 32)
    tokens=$((16384 * heads))
    timeout 200 "$BIN/hbmlab" measure --algo flash2 --head-dim $d --tokens $tokens --heads $heads "${common[@]}" \
      --out "$out/speed-flash2-d$d.json" > "$out/speed-flash2-d$d.log" 2>&1
    for v in ${VERSIONS:-1 2 3 4}; do
      HBMLAB_FLASH3_VERSION=$v timeout 200 "$BIN/hbmlab" measure --algo flash3 --head-dim $d --tokens $tokens --heads $heads \
        "${common[@]}" --out "$out/speed-flash3-v$v-d$d.json" > "$out/speed-flash3-v$v-d$d.log" 2>&1
    done
  done
  grep -hE "FAIL|rror" "$out"/speed-*.log | head
  python3 "$here/flash3_torch.py" --out "$out/speed-torch.json" --seq-lens ${SEQ_LENS:-2048,4096,8192,16384} \
    > "$out/speed-torch.log" 2>&1 || tail -3 "$out/speed-torch.log"
  python3 "$here/flash3_table.py" "$out" | tee "$out/speed-table.md"
fi
if has record; then
  echo "== record: flash3 (v${REC_VERSION:-3}) with CUPTI counters, for hbmlab validate"
  HBMLAB_FLASH3_VERSION=${REC_VERSION:-3} timeout 300 "$BIN/hbmlab" measure --algo flash3 --seq-len 1024,2048,4096,8192,16384 --head-dim 64,128 --causal both \
    --reps 20 --out "$out/h100-flash3.json" > "$out/h100-flash3.log" 2>&1
  echo "rc=$? $(grep -c ' ok ' "$out/h100-flash3.log") ok"; grep -E "FAIL|rror" "$out/h100-flash3.log" | head -5
fi
