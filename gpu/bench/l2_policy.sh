#!/usr/bin/env bash
# Does a line read twice outlast one read once when a stream overflows the L2? (gpu/bench/l2_policy.cu)
# A = A_MB (default 8) read once (cold), twice (hot) or three times (hot3), then B streamed once
# (twice: hot-b), then A again, every SM reading its own slices, under ncu with the L2 left as the
# kernels leave it. SEQUENCES (a comma list, default cold,hot,hot3,hot-b) may also name store (A
# stored whole, no read) and read-store (A read, then stored).
# Run: gpu/bench/l2_policy.sh OUTDIR   (writes OUTDIR/l2-policy.txt, OUTDIR/runs.txt, OUTDIR/ncu.csv; needs nvcc, ncu)
set -euo pipefail
out=${1:?usage: l2_policy.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin=${BIN:-$out/l2_policy}
[[ -n "${BIN:-}" ]] || nvcc -O3 -arch=sm_90 -o "$bin" "$here/l2_policy.cu"
a=${A_MB:-8}
bs=${B_MB:-8 16 24 32 36 40 44 48 56 64 80 96}
seqs=()
[[ -z "${SEQUENCES:-}" ]] || seqs=(--sequences "$SEQUENCES")
ncu --clock-control none --cache-control none -k regex:policy_ \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    --csv --page raw --print-units base --log-file "$out/ncu.csv" "$bin" "${seqs[@]}" "$a" $bs | tee "$out/runs.txt"
# One line per sequence: the DRAM bytes of A's last read, and the share of A that survived.
PYTHONPATH="$here" python3 - "$out" <<'PY' | tee "$out/l2-policy.txt"
import os, sys
from merge_ncu import num, read_rows
out = sys.argv[1]
rows = [x for x in read_rows(os.path.join(out, "ncu.csv")) if "policy_" in x.get("Kernel Name", "")]
runs = [l.split() for l in open(os.path.join(out, "runs.txt")) if l.startswith("run ")]
print(open(os.path.join(out, "runs.txt")).readline().strip())
print("sequence    A MB   B MB   DRAM read by each launch (MB)                     A's last read: DRAM MB   A kept   DRAM written (MB)")
i = 0
for r in runs:
    seq, a, b, n = r[1], float(r[2]), float(r[3]), int(r[5])
    reads = [num(rows[i + k]["dram__bytes_read.sum"]) / 1e6 for k in range(n)]
    written = sum(num(rows[i + k].get("dram__bytes_write.sum", "0")) / 1e6 for k in range(n))
    i += n
    if seq == "warm-up":
        continue
    kept = 1 - min(1.0, reads[-1] / a)
    print(f"{seq:10s} {a:5.1f} {b:6.1f}   {'  '.join(f'{x:7.1f}' for x in reads):49s} {reads[-1]:10.1f}      {kept * 100:5.1f} %   {written:8.1f}")
PY
