#!/usr/bin/env bash
# One device call for hbmlab's flash2 backward (gpu/flash2_backward.cu): the GPU tests, compute-sanitizer
# on small backward launches, the Br × Bc shapes side by side, the `hbmlab measure --pass backward`
# sweep with counters (→ h100-backward.json), the speed table beside PyTorch SDPA's flash and cuDNN
# backward (backward_speed.py), and PyTorch's flash backward under Nsight Compute (backward_sdpa.py →
# h100-backward-sdpa.json). Binaries built elsewhere in BIN, libraries in LIB.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/backward.sh OUTDIR [parts: test,san,shapes,sweep,speed,sdpa]
set -uo pipefail
out=${1:?usage: backward.sh OUTDIR [parts]}
parts=${2:-test,san,shapes,sweep,speed,sdpa}
source "$(dirname "$0")/device_env.sh"
if has test; then
  # Every compiled shape on ragged N (forward and backward kernels), then the backward's own cases.
  echo "== GPU tests"
  "$BIN/hbmlab_tests_gpu" "every compiled kernel shape matches the fp64 reference on ragged N,[backward]" 2>&1 |
    tee "$out/gpu-tests.log" | tail -40
fi
if has san; then
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer $tool, flash2 backward (with the forward that makes its O and L)"
    compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/hbmlab" measure --pass backward --algo flash2 \
      --seq-len 200 --tokens 400 --heads 2 --head-dim 64,128 --dtype fp16,bf16 --causal both --blocks all \
      --check-only 2>&1 | tee "$out/sanitizer-backward-$tool.log" | tail -3
  done
fi
if has shapes; then
  echo "== every compiled Br x Bc at N = 4096"
  "$BIN/hbmlab" measure --pass backward --algo flash2 --seq-len 4096 --head-dim 64,128 --causal both --blocks all \
    --counters none --reps 20 2>&1 | tee "$out/backward-shapes.log"
fi
if has sweep; then
  echo "== measure: flash2 backward, fp16 and a few bf16"
  "$BIN/hbmlab" measure --pass backward --algo flash2 --seq-len ${SEQ_LENS:-512,1024,2048,4096,8192,16384} \
    --head-dim 64,128 --causal both --dtype fp16 --reps 30 --out "$out/backward-fp16.json" 2>&1 | tee "$out/h100-backward.log"
  "$BIN/hbmlab" measure --pass backward --algo flash2 --seq-len 1024,4096,16384 --head-dim 64,128 --causal both \
    --dtype bf16 --reps 30 --out "$out/backward-bf16.json" 2>&1 | tee -a "$out/h100-backward.log"
  python3 - "$out/h100-backward.json" "$out/backward-fp16.json" "$out/backward-bf16.json" <<'EOF'
import json, sys
files = [json.load(open(p)) for p in sys.argv[2:]]
merged = dict(files[0], records=[r for f in files for r in f["records"]])
json.dump(merged, open(sys.argv[1], "w"), indent=1)
print(f"merged {len(merged['records'])} records into {sys.argv[1]}")
EOF
  rm -f "$out/backward-fp16.json" "$out/backward-bf16.json"
fi
if has speed; then
  echo "== speed beside PyTorch SDPA flash and cuDNN backward"
  (cd "$here" && python3 backward_speed.py "$out/h100-backward-speed.json" "$out/h100-backward.json") 2>&1 |
    tee "$out/h100-backward-speed.md"
fi
if has sdpa; then
  echo "== PyTorch SDPA flash backward under ncu"
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__registers_per_thread,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers
  (cd "$here" && python3 backward_sdpa.py --out "$out/backward-sdpa-shapes.json" &&
   ncu --clock-control none --cache-control all --nvtx --nvtx-include "sdpa/" --metrics "$metrics" \
     --csv --page raw --print-units base --log-file "$out/h100-backward-sdpa-ncu.csv" python3 backward_sdpa.py --ncu-pass &&
   python3 merge_ncu.py "$out/backward-sdpa-shapes.json" "$out/h100-backward-sdpa-ncu.csv" "$out/h100-backward-sdpa.json") 2>&1 |
    tail -5
  rm -f "$out/backward-sdpa-shapes.json"
fi
