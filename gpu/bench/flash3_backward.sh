#!/usr/bin/env bash
# One device call for hbmlab's flash3 backward (gpu/flash3_backward.cu, sm_90a): the GPU tests, the
# SASS (HGMMA, setmaxnreg), compute-sanitizer on small launches, the `hbmlab measure --pass backward`
# sweep with counters (→ h100-flash3-backward.json), flash2's backward timed on the same problems, the
# speed table beside PyTorch SDPA's flash and cuDNN backward (backward_speed.py →
# h100-flash3-backward-speed.{json,md}), and cuDNN's backward under Nsight Compute.
# Binaries built elsewhere in BIN, libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/flash3_backward.sh OUTDIR [parts: test,sass,quick,san,sweep,speed,cudnn]
set -uo pipefail
out=${1:?usage: flash3_backward.sh OUTDIR [parts]}
parts=${2:-test,sass,san,sweep,speed}
source "$(dirname "$0")/device_env.sh"
seq_lens=${SEQ_LENS:-512,1024,2048,4096,8192,16384}
if has test; then
  echo "== GPU tests: flash3 backward, then every compiled shape on ragged N"
  "$BIN/hbmlab_tests_gpu" "[flash3][backward]" 2>&1 | tee "$out/flash3-backward-tests.log" | tail -30
  "$BIN/hbmlab_tests_gpu" "every compiled kernel shape matches the fp64 reference on ragged N" 2>&1 |
    tee -a "$out/flash3-backward-tests.log" | tail -4
fi
if has sass; then
  echo "== SASS of flash3_backward_kernel: instruction counts"
  cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  "$cuobjdump" -sass "$BIN/hbmlab" | awk '/Function : .*flash3_backward_kernelI6__halfLi128ELb0E/{on=1; next} /Function :/{on=0} on' |
    grep -oE "(HGMMA|UTMALDG|SYNCS|USETMAXREG|RED|STL|LDL)[.A-Z0-9x]*" | sort | uniq -c | sort -rn | head -20
fi
if has quick; then
  echo "== flash3 and flash2 backward at N = 4096, 16384"
  "$BIN/hbmlab" measure --pass backward --algo flash3,flash2 --seq-len 4096,16384 --head-dim 64,128 --causal both \
    --counters none --reps 20 2>&1 | tail -16
fi
if has san; then
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer $tool, flash3 backward (with the flash3 forward that makes its O and L)"
    compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure --pass backward --algo flash3 \
      --seq-len 200 --tokens 400 --heads 2 --head-dim 64,128 --dtype fp16,bf16 --causal both \
      --check-only 2>&1 | tee -a "$out/h100-flash3-backward-sanitizer.log" | tail -3
    echo "exit status: $?" | tee -a "$out/h100-flash3-backward-sanitizer.log"
  done
fi
if has sweep; then
  echo "== measure: flash3 backward with counters (fp16, a few bf16); flash2 backward timed beside it"
  "$BIN/hbmlab" measure --pass backward --algo flash3 --seq-len "$seq_lens" --head-dim 64,128 --causal both \
    --dtype fp16 --reps 30 --out "$out/f3-fp16.json" 2>&1 | tee "$out/h100-flash3-backward.log"
  "$BIN/hbmlab" measure --pass backward --algo flash3 --seq-len 1024,4096,16384 --head-dim 64,128 --causal both \
    --dtype bf16 --reps 30 --out "$out/f3-bf16.json" 2>&1 | tee -a "$out/h100-flash3-backward.log"
  "$BIN/hbmlab" measure --pass backward --algo flash2 --seq-len "$seq_lens" --head-dim 64,128 --causal both \
    --dtype fp16 --reps 30 --counters none --out "$out/f2-fp16.json" 2>&1 | tail -3
  "$BIN/hbmlab" measure --pass backward --algo flash2 --seq-len 1024,4096,16384 --head-dim 64,128 --causal both \
    --dtype bf16 --reps 30 --counters none --out "$out/f2-bf16.json" 2>&1 | tail -3
  python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for name, parts in (("h100-flash3-backward.json", ("f3-fp16", "f3-bf16")), ("flash2-times.json", ("f2-fp16", "f2-bf16"))):
    files = [json.load(open(f"{out}/{p}.json")) for p in parts]
    merged = dict(files[0], records=[r for f in files for r in f["records"]])
    json.dump(merged, open(f"{out}/{name}", "w"), indent=1)
    print(f"merged {len(merged['records'])} records into {name}")
PY
  rm -f "$out"/f[23]-*.json
fi
if has speed; then
  echo "== speed beside PyTorch SDPA flash and cuDNN backward"
  (cd "$here" && python3 backward_speed.py "$out/h100-flash3-backward-speed.json" "$out/h100-flash3-backward.json" \
     "$out/flash2-times.json") 2>&1 | tee "$out/h100-flash3-backward-speed.md"
fi
if has cudnn; then
  echo "== PyTorch SDPA cuDNN backward under ncu"
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__registers_per_thread
  (cd "$here" && python3 backward_sdpa.py --backend cudnn --out "$out/cudnn-shapes.json" &&
   ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
     --csv --page raw --print-units base --log-file "$out/h100-flash3-backward-cudnn-ncu.csv" \
     python3 backward_sdpa.py --backend cudnn --ncu-pass &&
   python3 merge_ncu.py "$out/cudnn-shapes.json" "$out/h100-flash3-backward-cudnn-ncu.csv" \
     "$out/h100-flash3-backward-cudnn.json") 2>&1 | tail -5
  rm -f "$out/cudnn-shapes.json"
fi
