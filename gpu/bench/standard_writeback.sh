#!/usr/bin/env bash
# When standard attention's S goes back to DRAM: hbmlab's three kernels under Nsight Compute with the
# L2 flushed before each (--cache-control all), so that each kernel's DRAM writes are what it wrote
# back itself while it ran. fp16, d = 64, 64 × 64 tiles, B = 1, non-causal, on few heads, where S
# (H·N² halves) is from 0.7 to 5.4 times the H100's 50 MB L2: H = 4, N = 2K (S 33.6 MB); H = 8 and
# 16, N = 2K (67 and 134 MB); H = 4, N = 4K (134 MB); H = 32, N = 2K (268 MB). What qk_kernel writes
# back of S while it stores it, and what it leaves dirty in the L2 at its end (S less those bytes),
# is what the engine's write-back levels predict (docs/design.md, "Write-backs, and S and P from
# kernel to kernel").
# Run: HBMLAB=build/hbmlab gpu/bench/standard_writeback.sh OUTDIR
#   writes OUTDIR/standard-writeback-raw.csv (ncu's rows), OUTDIR/standard-writeback-ncu.csv (the kernels'
#   DRAM bytes and time) and OUTDIR/standard-writeback.txt (the table, with what of S qk_kernel leaves dirty)
set -uo pipefail
out=${1:?usage: standard_writeback.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
mkdir -p "$out"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
raw="$out/standard-writeback-raw.csv" csv="$out/standard-writeback-ncu.csv"
: > "$raw"
for shape in "4 2048" "8 2048" "16 2048" "4 4096" "32 2048"; do
  set -- $shape
  ncu --clock-control none --cache-control all --csv --page raw --print-units base --metrics "$metrics" \
    -k regex:'qk_kernel|softmax_kernel|pv_kernel' \
    "$hbmlab" measure --algo standard --batch 1 --heads "$1" --seq-len "$2" --head-dim 64 --blocks 64x64 \
    --causal no --dtype fp16 --profile-pass | grep '^"' | sed "s/^/\"H=$1 N=$2\",/" >> "$raw" ||
    echo "standard_writeback: H = $1, N = $2 failed" >&2
done
python3 - "$raw" "$csv" <<'PY' | tee "$out/standard-writeback.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
names = ("Kernel Name", "Block Size", "Grid Size", "dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
at = [head.index(name) for name in names]
kept = [["shape", *names]]  # ncu's header and units once, then each kernel's row
for r in rows:
    if len(r) > max(at) and r[at[0]] not in ("Kernel Name", ""):
        kept.append([r[0], *(r[k] for k in at)])
csv.writer(open(sys.argv[2], "w"), lineterminator="\n", quoting=csv.QUOTE_ALL).writerows(kept)
def num(s):
    return float(s.replace(",", ""))
print("shape          kernel          DRAM read MB  DRAM written MB  time us   S MB   S left dirty MB")
for r in kept[1:]:
    name = r[1].split("(")[0].split("::")[-1].split("<")[0]
    h, n = (int(x.split("=")[1]) for x in r[0].split())
    s = h * n * n * 2 / 1e6
    left = f"{s - num(r[5]) / 1e6:17.1f}" if name == "qk_kernel" else ""
    print(f"{r[0]:14s} {name:15s} {num(r[4]) / 1e6:12.1f} {num(r[5]) / 1e6:16.1f} {num(r[6]) / 1e3:8.1f} {s:6.1f}{left}")
PY
