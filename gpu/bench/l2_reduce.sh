#!/usr/bin/env bash
# The L2's reduction throughput (l2_reduce.cu): builds it for sm_90a, prints the SASS opcodes of each
# case's kernel (the reduction instruction each one times is on record) and, for any object files
# given after OUTDIR, the reduction and atomic instructions they hold (the backward kernels' dQ
# accumulation); runs the table; then runs it once more under Nsight Compute for the L2's own count
# of reduction requests and sectors per L2 clock (a cross-check; skipped if ncu fails).
# Run: gpu/bench/l2_reduce.sh OUTDIR [OBJECT.o ...]   (writes OUTDIR/l2-reduce.txt, l2-reduce-ncu.csv)
set -euo pipefail
out=${1:?usage: l2_reduce.sh OUTDIR [OBJECT.o ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
txt="$out/l2-reduce.txt"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$out/l2_reduce" "$here/l2_reduce.cu"
"$out/l2_reduce" | tee "$txt" || echo "l2_reduce: the check failed" | tee -a "$txt"
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
  sass_hist "$out/l2_reduce" all
  for obj in "$@"; do
    echo "# RED/ATOM opcodes in $(basename "$obj") (cuobjdump -sass)"
    sass_hist "$obj" red
  done
} | tee -a "$txt"
metrics=lts__t_requests_op_red.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__cycles_elapsed.avg,lts__cycles_elapsed.avg.per_second,gpu__time_duration.sum
if timeout 60 ncu --clock-control none --metrics "$metrics" --csv --page raw --print-units base \
     --log-file "$out/l2-reduce-ncu.csv" "$out/l2_reduce" 1 > /dev/null; then
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
