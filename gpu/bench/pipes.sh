#!/usr/bin/env bash
# The SM's pipe rates (pipes.cu): builds it for sm_90a, prints the SASS opcodes of each measured
# kernel (so the instruction each case times is on record), runs it, and writes the table and a
# JSON of it with the command and device.
# Then, as a cross-check of the instruction counts and of the shared-memory peak, runs it again
# under Nsight Compute (instructions, shared-memory wavefronts and their sustained peak per launch).
# Run: gpu/bench/pipes.sh OUTDIR   (writes OUTDIR/pipes.txt, pipes.json, pipes-sass.txt, pipes-ncu.csv)
set -euo pipefail
out=${1:?usage: pipes.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o "$out/pipes" "$here/pipes.cu"
# Opcode histogram per kernel: the loop of each case should be the instruction it names.
cuobjdump -sass "$out/pipes" | python3 "$here/sass_opcodes.py" > "$out/pipes-sass.txt"
"$out/pipes" | tee "$out/pipes.txt"
ncu --clock-control none --metrics smsp__inst_executed.sum,sm__cycles_elapsed.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.peak_sustained \
    --csv --page raw --print-units base --log-file "$out/pipes-ncu.csv" "$out/pipes" > /dev/null
# The table as JSON, with ncu's count per case beside it (median of the timed launches; pipes.cu
# launches each case 6 times, the first a warm-up): warp instructions and shared-memory wavefronts
# (128 bytes) per SM clock, and the wavefronts' sustained peak.
python3 - "$out/pipes.txt" "$out/pipes-ncu.csv" "$out/pipes.json" <<'PY'
import csv, json, re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
rows = []
for line in lines[2:]:
    m = re.match(r"(.+?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(\w+)$", line)
    if m:
        rows.append({"case": m.group(1).strip(), "threads_per_sm": int(m.group(2)),
                     "per_clock_per_sm": float(m.group(3)), "unit": m.group(7),
                     "warp_instructions_per_clock_per_sm": float(m.group(4)),
                     "cycles": int(m.group(5)), "clock_mhz": int(m.group(6))})
ncu = [r for r in csv.DictReader(l for l in open(sys.argv[2]) if l.strip() and not l.startswith("=="))
       if r.get("ID", "").isdigit()]
num = lambda r, k: float(r[k].replace(",", ""))
if len(ncu) != 6 * len(rows):
    sys.exit(f"pipes: {len(rows)} cases but {len(ncu)} ncu rows")
print(f"{'case':<26} {'ncu warp instr/clk/SM':>22} {'ncu smem wavefronts/clk/SM':>27}")
for k, row in enumerate(rows):
    runs = ncu[6 * k + 1:6 * k + 6]
    sms = num(runs[0], "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.peak_sustained")  # 1 per SM
    cyc = [num(r, "sm__cycles_elapsed.avg") for r in runs]
    row["ncu_warp_instructions_per_clock_per_sm"] = round(statistics.median(
        num(r, "smsp__inst_executed.sum") / c / sms for r, c in zip(runs, cyc)), 3)
    row["ncu_smem_wavefronts_per_clock_per_sm"] = round(statistics.median(
        num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") / c / sms for r, c in zip(runs, cyc)), 3)
    row["ncu_smem_wavefronts_peak_per_clock_per_sm"] = 1.0
    print(f"{row['case']:<26} {row['ncu_warp_instructions_per_clock_per_sm']:>22.3f} {row['ncu_smem_wavefronts_per_clock_per_sm']:>27.3f}")
json.dump({"command": "gpu/bench/pipes.sh OUTDIR", "device": lines[0],
           "ncu": "ncu --clock-control none: smsp__inst_executed.sum, sm__cycles_elapsed.avg, "
                  "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum (peak_sustained: 1 per SM per clock)",
           "rows": rows}, open(sys.argv[3], "w"), indent=1)
print(f"pipes.json: {len(rows)} cases")
PY
