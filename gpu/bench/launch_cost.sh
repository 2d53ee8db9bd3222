#!/usr/bin/env bash
# The fixed cost of a kernel and of its first loads, as Nsight Compute times them (launch_cost.cu):
# builds it, profiles every measured launch under --clock-control none --cache-control all (as the
# calibration runs are), and prints per case (NAME, CTAs, dependent loads) the median, fastest and
# slowest gpu__time_duration of its launches, then a line fitted to the dependent-load chain.
# Run: gpu/bench/launch_cost.sh OUTDIR   (writes OUTDIR/launch-cost-ncu.csv and OUTDIR/launch-cost.txt)
set -euo pipefail
out=${1:?usage: launch_cost.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o "$out/launch_cost" "$here/launch_cost.cu"
ncu --clock-control none --cache-control all --launch-skip 3 --metrics gpu__time_duration.sum \
    --csv --page raw --print-units base --log-file "$out/launch-cost-ncu-raw.csv" "$out/launch_cost" > "$out/launch-cost-runs.txt"
# Keep the columns that say which launch it was and how long it took.
python3 -c 'import csv, sys
keep = ["ID", "Kernel Name", "Block Size", "Grid Size", "gpu__time_duration.sum"]
rows = csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("=="))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), keep, extrasaction="ignore")
w.writeheader()
w.writerows(rows)' "$out/launch-cost-ncu-raw.csv" "$out/launch-cost-ncu.csv"
python3 - "$out/launch-cost-runs.txt" "$out/launch-cost-ncu.csv" > "$out/launch-cost.txt" <<'PY'
import csv, statistics, sys
cases = [tuple(line.split()[1:]) for line in open(sys.argv[1]) if line.startswith("case ")]
rows = [r for r in csv.DictReader(l for l in open(sys.argv[2]) if not l.startswith("==")) if r.get("ID", "").isdigit()]
if len(rows) != len(cases):
    sys.exit(f"launch_cost: {len(cases)} launches but {len(rows)} ncu rows")
times = {}
for case, row in zip(cases, rows):
    times.setdefault(case, []).append(float(row["gpu__time_duration.sum"].replace(",", "")) / 1e3)
print(f"{'case':<9} {'CTAs':>5} {'loads':>5} {'median us':>9} {'fastest':>8} {'slowest':>8}   (ncu gpu__time_duration)")
for (name, ctas, loads), t in times.items():
    print(f"{name:<9} {ctas:>5} {loads:>5} {statistics.median(t):>9.3f} {min(t):>8.3f} {max(t):>8.3f}")
chain = {int(k): statistics.median(t) for (name, _, k), t in times.items() if name == "chain"}
if len(chain) > 1:
    ks = sorted(chain)
    mean_k, mean_t = statistics.mean(ks), statistics.mean(chain[k] for k in ks)
    slope = sum((k - mean_k) * (chain[k] - mean_t) for k in ks) / sum((k - mean_k) ** 2 for k in ks)
    print(f"chain fit: {mean_t - slope * mean_k:.3f} us + {slope * 1e3:.0f} ns per dependent cold load")
PY
cat "$out/launch-cost.txt"
