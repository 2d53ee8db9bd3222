#!/usr/bin/env bash
# Shared-memory wavefronts per SASS instruction of hbmlab's kernels (Nsight Compute's SourceCounters),
# to see which accesses take more wavefronts than their bytes / 128 (bank conflicts) or fewer (a
# broadcast): the backward kernel (d = 128, 64 × 128), the decode split kernel (the h100-onchip-cupti
# record's shape), flash1 and standard (N = 1024, d = 64). One launch of each kernel, small shapes:
# the per-instruction wavefronts are those of every (i, j) step, whatever the grid.
# Run: HBMLAB=build/hbmlab gpu/bench/smem_source_ncu.sh OUTDIR
#   writes OUTDIR/<name>.ncu-rep and OUTDIR/<name>-source.csv (ncu --page source --print-source sass).
set -uo pipefail
out=${1:?usage: smem_source_ncu.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
mkdir -p "$out"
profile() {  # name kernel-regex launches hbmlab-measure-arguments...
  local name=$1 kernels=$2 count=$3
  shift 3
  ncu --section SourceCounters --section MemoryWorkloadAnalysis_Tables --clock-control none -k "regex:$kernels" \
      -c "$count" -f -o "$out/$name" "$hbmlab" measure --dtype fp16 --profile-pass "$@" > "$out/$name-run.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name-source.csv" 2> "$out/$name-source.err"
  ncu -i "$out/$name.ncu-rep" --page details --csv > "$out/$name-details.csv" 2>&1
}
profile backward flash2_backward_kernel 1 --algo flash2 --pass backward --seq-len 1024 --head-dim 128 --heads 4 --batch 1 \
    --causal no
profile decode decode_split_kernel 1 --algo flash-decoding --seq-len 8192 --query-len 1 --heads 32 --kv-heads 8 \
    --head-dim 128 --splits 16 --batch 1 --causal no
profile flash1-standard 'flash1_kernel|qk_kernel|softmax_kernel|pv_kernel' 4 --algo flash1,standard --seq-len 1024 \
    --head-dim 64 --heads 1 --batch 1 --causal no
# The summary: per kernel and SASS opcode (access size), instructions, wavefronts and ncu's ideal,
# summed over the profiled launches of that kernel → OUTDIR/smem-source-summary.txt.
python3 - "$out" > "$out/smem-source-summary.txt" <<'PY'
import collections, csv, glob, re, sys
def number(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
for path in sorted(glob.glob(f"{sys.argv[1]}/*-source.csv")):
    by_kernel = collections.OrderedDict()
    kernel, header = None, None
    for row in csv.reader(open(path)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            m = re.match(r"(?:void )?(.*?>)\(", row[1])
            kernel, header = (m.group(1) if m else row[1]).split("<unnamed>::")[-1], None
            continue
        if row[0] == "Address":
            header = row
            continue
        if not header:
            continue
        r = dict(zip(header, row))
        wavefronts = number(r.get("L1 Wavefronts Shared", "0"))
        if wavefronts == 0:
            continue
        words = r["Source"].split()
        opcode = words[1] if words[0].startswith("@") else words[0]
        acc = by_kernel.setdefault(kernel, collections.OrderedDict()).setdefault((opcode, r.get("Access Size", "")), [0, 0, 0])
        acc[0] += number(r["Instructions Executed"])
        acc[1] += wavefronts
        acc[2] += number(r.get("L1 Wavefronts Shared Ideal", "0"))
    for kernel, ops in by_kernel.items():
        print(kernel)
        for (opcode, size), (inst, wavefronts, ideal) in sorted(ops.items(), key=lambda x: -x[1][1]):
            print(f"  {opcode:24s} {size:>4s}-bit  {inst:>12,.0f} instructions  {wavefronts:>12,.0f} wavefronts "
                  f"({wavefronts / inst:.3f} each)  ideal {ideal:>12,.0f} ({ideal / inst:.3f})")
PY
