#!/usr/bin/env bash
# The L2's reduction throughput (l2_reduce.cu): builds it for sm_90a, prints the SASS opcodes of each
# case's kernel (the reduction instruction each one times is on record) and, for any object files
# given after OUTDIR, the reduction and atomic instructions they hold (the backward kernels' dQ
# accumulation); runs the table; then runs it once more under Nsight Compute for the L2's own count
# of reduction requests and sectors per L2 clock (a cross-check; skipped if ncu fails).
# The SM's side (`l2_reduce sm`: one SM's reduction rate, and whether reductions hold the warps that
# issue them) goes to sm-reduce.txt, with its kernels' SASS opcodes and an ncu pass of its own.
# Run: gpu/bench/l2_reduce.sh OUTDIR [OBJECT.o ...]   (writes OUTDIR/l2-reduce.txt, l2-reduce-ncu.csv,
#      sm-reduce.txt, sm-reduce-ncu.csv); L2_REDUCE_BIN=path takes a binary built elsewhere.
set -euo pipefail
out=${1:?usage: l2_reduce.sh OUTDIR [OBJECT.o ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
txt="$out/l2-reduce.txt"
bin=${L2_REDUCE_BIN:-$out/l2_reduce}
[ -n "${L2_REDUCE_BIN:-}" ] || nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$bin" "$here/l2_reduce.cu"
"$bin" | tee "$txt" || echo "l2_reduce: the check failed" | tee -a "$txt"
sm="$out/sm-reduce.txt"
"$bin" sm | tee "$sm" || echo "l2_reduce sm: the check failed" | tee -a "$sm"
{
  echo
  echo "# SASS opcodes of the SM cases' kernels (cuobjdump -sass, top 8)"
  cuobjdump -sass "$bin" | python3 "$here/sass_opcodes.py" | grep -E "sm_(rate|held)_kernel" | sed 's/^_ZN[0-9]*_GLOBAL__N__[0-9a-f]*_[0-9]*_l2_reduce_cu_[0-9a-f]*[0-9]*/  /'
} | tee -a "$sm" || true
# ncu on one SM, 8 warps: the rate cases (red.f32 line, red.v2.f32 rows) and 32 reductions + 32 MMAs
# a round: the instructions' count, the LSU's requests, and what the warps stalled on per issue.
sm_metrics=sm__cycles_elapsed.max,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_red.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio
if timeout 120 ncu --clock-control none --metrics "$sm_metrics" --csv --page raw --print-units base \
     --log-file "$out/sm-reduce-ncu.csv" "$bin" sm-ncu > /dev/null; then
  python3 - "$out/sm-reduce-ncu.csv" <<'PY' | tee -a "$sm"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.strip() and not l.startswith("=="))
        if r.get("ID", "").isdigit()]
names = ["rate red.f32 line, 1 SM x 8 warps", "rate red.v2.f32 rows, 1 SM x 8 warps", "held red.f32 line, 32 red + 32 mma"]
print("\n# ncu --clock-control none (l2_reduce sm-ncu): per kernel, the metric and its value")
for name, r in zip(names, rows):
    print(name)
    for k, v in r.items():
        if k.startswith(("sm__", "smsp__", "l1tex__")): print(f"  {k:<75} {v}")
PY
else
  echo "ncu (SM cases): not run or failed" | tee -a "$sm"
fi
# Opcode histogram per kernel (top 6), then every RED/ATOM opcode of the given objects.
sass_hist() {
  cuobjdump -sass "$1" | python3 -c 'import re, sys, collections
only = sys.argv[1] == "red"
name, hist = None, collections.Counter()
def flush():
    if name and hist: print(" ", name[:60], " ".join(f"{op}:{n}" for op, n in hist.most_common(6)))
for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        flush(); name, hist = m.group(1), collections.Counter(); continue
    m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", line)
    if m and (not only or m.group(1).startswith(("RED", "ATOM"))): hist[m.group(1)] += 1
flush()' "$2"
}
{
  echo
  echo "# SASS opcodes of each case (cuobjdump -sass, top 6)"
  sass_hist "$bin" all
  for obj in "$@"; do
    echo "# RED/ATOM opcodes in $(basename "$obj") (cuobjdump -sass)"
    sass_hist "$obj" red
  done
} | tee -a "$txt"
metrics=lts__t_requests_op_red.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__cycles_elapsed.avg,lts__cycles_elapsed.avg.per_second,gpu__time_duration.sum
if timeout 60 ncu --clock-control none --metrics "$metrics" --csv --page raw --print-units base \
     --log-file "$out/l2-reduce-ncu.csv" "$bin" 1 > /dev/null; then
  # ncu's rows: 2 launches per case (warm-up, timed); the timed one's L2 counts per L2 clock.
  python3 - "$out/l2-reduce-ncu.csv" <<'PY' | tee -a "$txt"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.strip() and not l.startswith("=="))
        if r.get("ID", "").isdigit()]
num = lambda r, k: float(r[k].replace(",", ""))
names = ["red.global.add.f32", "red.global.add.v2.f32", "red.global.add.v4.f32", "red.global.add.v2.f32 dQ rows",
         "ld.global.cg.v2.f32", "red.v2 + ld.v2 (half each)"]
print("\n# ncu --clock-control none, the timed launch of each case: L2 (lts) counts per L2 clock, all slices")
print(f"{'case':<32} {'red req/clk':>12} {'red sect/clk':>13} {'read sect/clk':>14} {'L2 MHz':>8} {'us':>8}")
for k, name in enumerate(names):
    if 2 * k + 1 >= len(rows): break
    r = rows[2 * k + 1]
    c = num(r, "lts__cycles_elapsed.avg")
    print(f"{name:<32} {num(r, 'lts__t_requests_op_red.sum') / c:>12.1f} {num(r, 'lts__t_sectors_op_red.sum') / c:>13.1f} "
          f"{num(r, 'lts__t_sectors_op_read.sum') / c:>14.1f} {num(r, 'lts__cycles_elapsed.avg.per_second') / 1e6:>8.0f} "
          f"{num(r, 'gpu__time_duration.sum') / 1e3:>8.1f}")
PY
else
  echo "ncu: not run or failed (the table above stands alone)" | tee -a "$txt"
fi
