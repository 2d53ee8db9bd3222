#!/usr/bin/env bash
# The L2 under flash1's pattern with few (batch, head) pairs: CTAS CTAs of an ordinary launch, each
# sweeping its own slice of a 12–40 MB footprint PASSES times, read-only or storing every line back,
# under ncu (DRAM bytes), each run naming the SMs its CTAs ran on and how many sat by each partition.
# Run: gpu/bench/l2_private.sh OUTDIR   (writes OUTDIR/l2-private.txt and OUTDIR/ncu/*.csv; needs nvcc, ncu)
set -euo pipefail
out=${1:?usage: l2_private.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/ncu"
bin=${BIN:-$out/l2_partition}
[[ -n "${BIN:-}" ]] || nvcc -O3 -arch=sm_90 -o "$bin" "$here/l2_partition.cu"
passes=${PASSES:-8}
footprints=${FOOTPRINTS:-8 12 16 20 24 28 32 36 40}
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum
"$bin" map "$out/sides.txt" > "$out/map.txt"
tail -1 "$out/map.txt"
: > "$out/runs.txt"
for rw in read write; do
  for ctas in ${CTAS:-4 8 16 32}; do
    ncu --clock-control none --cache-control all -k regex:private_kernel --metrics "$metrics" --csv --page raw \
        --print-units base --log-file "$out/ncu/private-$rw-$ctas.csv" \
        "$bin" private "$out/sides.txt" "$ctas" "$passes" "$rw" $footprints | grep '^run ' | tee -a "$out/runs.txt"
  done
done
# One line per run: the share of the later passes' reads that hit, 1 − (DRAM read − F) / ((PASSES − 1) · F).
PYTHONPATH="$here" python3 - "$out" <<'PY' | tee "$out/l2-private.txt"
import os, sys
from merge_ncu import num, read_rows
out = sys.argv[1]
runs = [l.split() for l in open(os.path.join(out, "runs.txt")) if l.startswith("run ")]
print("mode           ctas side0 side1  footprint MB  DRAM read MB  DRAM write MB  later passes' reads that hit")
seen = {}
for r in runs:
    rw, ctas, passes, F = r[2].split("-")[1], int(r[6]), int(r[4]), float(r[8])
    key = f"{rw}-{ctas}"; i = seen.get(key, 0); seen[key] = i + 1
    rows = [x for x in read_rows(os.path.join(out, "ncu", f"private-{key}.csv")) if "private_kernel" in x.get("Kernel Name", "")]
    rd, wr = num(rows[i]["dram__bytes_read.sum"]), num(rows[i]["dram__bytes_write.sum"])
    hit = 1 - max(0.0, rd - F) / ((passes - 1) * F)
    print(f"{r[2]:14s} {ctas:4d} {int(r[12]):5d} {int(r[14]):5d} {F/1e6:13.1f} {rd/1e6:13.1f} {wr/1e6:14.1f}  {hit*100:6.1f} %")
PY
