#!/usr/bin/env bash
# What passes the SM's load/store data pipe besides shared-memory loads and stores (lsu_pipe.cu):
# builds it for sm_90a, records the SASS opcodes of each case, runs each kernel once under Nsight
# Compute and prints, per case, the data pipe's wavefronts (all, and the shared-memory loads' and
# stores') per warp instruction of the case, and the pipe's busy fraction.
# Run: gpu/bench/lsu_pipe.sh OUTDIR   (writes OUTDIR/lsu-pipe.txt, lsu-pipe-ncu.csv, lsu-pipe-sass.txt)
set -euo pipefail
out=${1:?usage: lsu_pipe.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$out/lsu_pipe" "$here/lsu_pipe.cu"
cuobjdump -sass "$out/lsu_pipe" | python3 "$here/sass_opcodes.py" > "$out/lsu-pipe-sass.txt" || echo "lsu_pipe.sh: no SASS listing" >&2
metrics=l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__cycles_elapsed.max
ncu --clock-control none --csv --page raw --print-units base --metrics "$metrics" "$out/lsu_pipe" > "$out/lsu-pipe-ncu.csv"
python3 - "$out/lsu-pipe-ncu.csv" <<'PY' | tee "$out/lsu-pipe.txt"
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))[1:]
def num(r, k):
    try:
        return float(r[k].replace(",", ""))
    except (KeyError, ValueError):
        return float("nan")
ctas, warps, iters = 4 * 132, 4, 4096
print("case   data-pipe wavefronts / warp instruction of the case (all, shared, shared ld, shared st)   pipe busy   warp instructions issued / case instruction")
for r in rows:
    name = r["Kernel Name"].split("(")[0].split("::")[-1].replace("_kernel", "")
    n = ctas * warps * iters
    print(f"{name:6s} {num(r, 'l1tex__data_pipe_lsu_wavefronts.sum') / n:6.3f} "
          f"{num(r, 'l1tex__data_pipe_lsu_wavefronts_mem_shared.sum') / n:6.3f} "
          f"{num(r, 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum') / n:6.3f} "
          f"{num(r, 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum') / n:6.3f}"
          f"   {num(r, 'l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed'):6.1f} %"
          f"   {num(r, 'smsp__inst_executed.sum') / n:5.2f}")
PY
