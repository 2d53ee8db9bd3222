#!/usr/bin/env bash
# flash1's share of the SM's shared-memory bandwidth (smem_warps.cu), in one device call: builds it,
# keeps the SASS of its loops, runs it, then reads under Nsight Compute each case's shared-memory
# wavefronts (128 bytes each) and instructions, and the same counters of hbmlab's flash1 kernel
# itself (gpu/flash1.cu, `hbmlab measure --profile-pass`; B·H = 128 CTAs at N = 2048: one an SM).
# Run: HBMLAB=.carry/bin/hbmlab gpu/bench/smem_warps.sh OUTDIR
#   writes OUTDIR/smem-warps.txt (the table, the ncu table, the opcodes), smem-warps-ncu.csv and,
#   with HBMLAB, flash1-smem-ncu.csv
set -uo pipefail
out=${1:?usage: smem_warps.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$out/smem_warps" "$here/smem_warps.cu" || exit 1
metrics=l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,sm__cycles_active.avg,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,gpu__time_duration.sum,launch__grid_size
common=(--clock-control none --csv --page raw --print-units base --metrics "$metrics")
{
  "$out/smem_warps" || exit 1
  echo
  ncu "${common[@]}" --log-file "$out/smem-warps-ncu.csv" "$out/smem_warps" once > "$out/smem-warps-once.txt" 2>&1 || echo "ncu: rc=$?"
  if [[ -n "${HBMLAB:-}" ]]; then
    ncu "${common[@]}" --cache-control all -k regex:flash1_kernel --log-file "$out/flash1-smem-ncu.csv" \
        "$HBMLAB" measure --algo flash1 --seq-len 2048 --head-dim 64,128 --blocks 64x64,32x32 --causal no --dtype fp16 \
        --profile-pass > "$out/flash1-measure.log" 2>&1 || echo "ncu flash1: rc=$?"
  fi
  # Per case (and per flash1 launch): wavefronts per SM clock (ncu's elapsed cycles, every SM), their
  # loads and stores per 32 FMAs (a warp's FMA instruction), and the shared-memory instructions per 32 FMAs.
  python3 - "$out/smem-warps-once.txt" "$out/smem-warps-ncu.csv" "$out/flash1-smem-ncu.csv" <<'PY'
import csv, io, os, sys
def rows(path):
    if not os.path.exists(path): return []
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    return [r for r in csv.DictReader(io.StringIO(text[start:])) if r.get("ID", "").strip().isdigit()] if start >= 0 else []
num = lambda r, k: float(r[k].replace(",", "")) if r.get(k, "").strip() not in ("", "n/a") else float("nan")
names = [l[:24].strip() + " " + l[25:29].strip() + " CTA" for l in open(sys.argv[1]) if "(once" in l]
print(f"{'ncu (one launch a case)':<34} {'wavefr/clk/SM':>13} {'ld wf/32 FMA':>12} {'st wf/32 FMA':>12} {'LDS/32 FMA':>10} {'STS/32 FMA':>10} {'conflicts':>9}")
def line(label, r):
    sms = 132.0
    fma = num(r, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum") / 32
    wf = num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
    print(f"{label:<34} {wf / num(r, 'sm__cycles_elapsed.avg') / sms:>13.3f}"
          f" {num(r, 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum') / fma:>12.3f}"
          f" {num(r, 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum') / fma:>12.3f}"
          f" {num(r, 'smsp__inst_executed_op_shared_ld.sum') / fma:>10.3f} {num(r, 'smsp__inst_executed_op_shared_st.sum') / fma:>10.3f}"
          f" {num(r, 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum'):>9.0f}")
for name, r in zip(names, rows(sys.argv[2])):
    line(name, r)
f1 = rows(sys.argv[3])
if f1:
    print("hbmlab's flash1 (measure --seq-len 2048 --head-dim 64,128 --blocks 64x64,32x32 --causal no): the check launch, then the record's")
    for k, r in enumerate(f1):
        line(f"flash1 launch {k + 1} grid {num(r, 'launch__grid_size'):.0f} {num(r, 'gpu__time_duration.sum') / 1e3:.0f} us", r)
PY
  echo
  echo "# Shared-memory, global-store, barrier and FMA opcodes of each kernel (cuobjdump -sass)"
  sass_mem() {
    python3 -c 'import collections, re, sys
name, hist = None, collections.Counter()
def flush():
    if name and hist: print(name[:72], " ".join(f"{op}:{n}" for op, n in sorted(hist.items())))
for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        flush(); name, hist = m.group(1), collections.Counter(); continue
    m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", line)
    if m and re.match(r"(LDS|STS|STG|BAR|FFMA)", m.group(1)): hist[m.group(1)] += 1
flush()'
  }
  cuobjdump -sass "$out/smem_warps" | sass_mem
  if [[ -n "${HBMLAB:-}" ]]; then
    cuobjdump -sass "$HBMLAB" 2>/dev/null | sass_mem | grep flash1_kernel
  fi
} 2>&1 | tee "$out/smem-warps.txt"
