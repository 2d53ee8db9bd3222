#!/usr/bin/env bash
# flash1's step taken apart, in one device call: `smem_warps step` (smem_warps.cu) times its products,
# its softmax, its inner loop and its whole step (the loop with line 8's loads and line 12–13's stores)
# with 1, 2 and up to 4 CTAs an SM; beside it, hbmlab's flash1 kernel itself at N = 512, 1024 and
# 2048 (B·H·N = 262,144: 512, 256 and 128 CTAs) under Nsight Compute, as SM cycles a block pair.
# Run: [SMEM_WARPS=prebuilt binary] HBMLAB=build/hbmlab gpu/bench/flash1_step.sh OUTDIR
#   writes OUTDIR/flash1-step.txt (assets/measurements/h100-flash1-step.txt) and OUTDIR/flash1-step-ncu.csv
set -uo pipefail
out=${1:?usage: flash1_step.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${SMEM_WARPS:-}
if [[ -z $bin ]]; then
  bin=$out/smem_warps
  nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/smem_warps.cu" || exit 1
fi
{
  echo "# HBMLAB=build/hbmlab gpu/bench/flash1_step.sh OUTDIR ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
  echo "# smem_warps step: a CTA's clock64 cycles over its pairs (median CTA); SM cyc/pair = that / pairs / CTAs an SM"
  "$bin" step
} 2>&1 | tee "$out/flash1-step.txt"

if [[ -n ${HBMLAB:-} ]]; then
  metrics=sm__cycles_elapsed.max,sm__cycles_elapsed.avg,sm__cycles_active.avg,gpu__time_duration.sum,launch__grid_size,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,launch__registers_per_thread,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum
  ncu --clock-control none --cache-control all --metrics "$metrics" -k regex:flash1_kernel --csv --page raw \
      --print-units base --log-file "$out/flash1-step-ncu.csv" \
      "$HBMLAB" measure --algo flash1 --seq-len 512,1024,2048 --head-dim 64,128 --causal no --dtype fp16 \
      --blocks all --profile-pass > "$out/flash1-measure.log" 2>&1 || echo "flash1_step: ncu failed" >&2
  python3 - "$out/flash1-step-ncu.csv" "$here" <<'PY' | tee -a "$out/flash1-step.txt"
import math, re, sys
sys.path.insert(0, sys.argv[2])
import merge_ncu  # the ncu CSV reader every calibration script uses
rows = merge_ncu.read_rows(sys.argv[1])
num = lambda r, k: merge_ncu.num(r[k])
sms = 132
print("# hbmlab's flash1 kernel (hbmlab measure --algo flash1 --seq-len 512,1024,2048 --causal no --blocks all, under ncu;")
print("# each record's check launch, then its timed one): CTAs an SM = min(grid / SMs, the occupancy limit); SM cyc/pair =")
print("# sm__cycles_elapsed.max over the busiest SM's pairs (ceil(grid / SMs) CTAs of (N/Br)(N/Bc) pairs), avg: .avg over grid·pairs / SMs")
print(f"{'d':<4} {'Br':<4} {'Bc':<4} {'N':<5} {'grid':>5} {'occ':>4} {'regs':>5} {'us':>9} {'MHz':>6} {'max SM cyc/pair':>16} {'avg':>8} {'wavefr/clk':>10} {'FMA/clk':>8}")
for r in rows:
    m = re.search(r"flash1_kernel<__half, (\d+), (\d+), (\d+)>", r["Kernel Name"])
    if not m: continue
    d, br, bc = map(int, m.groups())
    grid = int(num(r, "launch__grid_size"))
    N = 262144 // grid
    occ = int(min(num(r, "launch__occupancy_limit_shared_mem"), num(r, "launch__occupancy_limit_registers")))
    pairs = (N // br) * (N // bc)
    mx, av, ns = num(r, "sm__cycles_elapsed.max"), num(r, "sm__cycles_elapsed.avg"), num(r, "gpu__time_duration.sum")
    busiest = math.ceil(grid / sms) * pairs
    wf = num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") / av / sms
    fma = num(r, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum") / av / sms
    print(f"{d:<4} {br:<4} {bc:<4} {N:<5} {grid:>5} {occ:>4} {num(r, 'launch__registers_per_thread'):>5.0f} {ns / 1e3:>9.1f} {av / ns * 1e3:>6.0f}"
          f" {mx / busiest:>16.0f} {av / (grid * pairs / sms):>8.0f} {wf:>10.3f} {fma:>8.2f}")
PY
fi
