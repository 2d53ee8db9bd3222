#!/usr/bin/env bash
# flash2's forward step with exactly one and exactly two CTAs on every SM, measured, predicted by the
# engine and by an issue-order model of the kernel's SASS (sass_issue.py): where the time-by-head-
# dimension error of the flash2 room comes from (docs/design.md, "What is left").
# hbmlab's flash2 forward at every compiled fp16 block shape, B = 1, under ncu: grids of 128 CTAs (one
# an SM) and 256 (two an SM, all resident at once), each at two sequence lengths with the same grid (N
# and 2N with half the heads), so the difference of the SM's elapsed cycles over the difference of its
# steps is a step, without the launch, the prologue or a last wave; not causal, and causal with one CTA
# an SM (the last row block's N/Bc steps set the SM's elapsed cycles).
# Run: HBMLAB=build/hbmlab gpu/bench/flash2_residency.sh OUTDIR
#   writes OUTDIR/raw/*.csv (ncu, per run), OUTDIR/flash2-sass.txt.gz (the kernels' SASS, not causal and causal),
#   OUTDIR/flash2-residency.txt (the table: assets/measurements/h200-flash2-residency.txt) and
#   OUTDIR/flash2-residency-ncu.csv (per kernel and run: h200-flash2-residency-ncu.csv).
set -uo pipefail
out=${1:?usage: flash2_residency.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/raw"
metrics=sm__cycles_elapsed.max,smsp__inst_executed.sum,launch__grid_size,sm__ctas_launched.max,sm__pipe_tensor_cycles_active.max
profile() {  # profile TAG HEADS N BLOCKS D [CAUSAL]
  local causal=${6:-no} log=$out/raw/$1-d$5-h$2-n$3${6:+-causal}.csv
  ncu --clock-control none --csv --page raw --print-units base --section WarpStateStats --metrics "$metrics" \
    -k regex:flash2_kernel "$hbmlab" measure --algo flash2 --seq-len "$3" --head-dim "$5" --heads "$2" --batch 1 \
    --causal "$causal" --dtype fp16 --blocks "$4" --profile-pass > "$log" 2> "${log%.csv}.err" ||
    { echo "flash2_residency: ncu failed on $log:" >&2; tail -3 "${log%.csv}.err" >&2; }
}
for d in 64 128; do
  rows128=128x128,128x64
  [[ $d == 128 ]] && rows128=128x64,128x32
  profile one 2 8192 $rows128 $d; profile one 1 16384 $rows128 $d
  profile two 4 8192 $rows128 $d; profile two 2 16384 $rows128 $d
  profile one 2 4096 64x64 $d; profile one 1 8192 64x64 $d
  profile two 4 4096 64x64 $d; profile two 2 8192 64x64 $d
  # Causal, one CTA an SM: the longest CTA (the last row block) sets the SM's elapsed cycles, N/Bc steps.
  profile one 2 8192 $rows128 $d yes; profile one 1 16384 $rows128 $d yes
  profile one 2 4096 64x64 $d yes; profile one 1 8192 64x64 $d yes
done
cuobjdump -sass "$hbmlab" | awk '/Function :/ { keep = /flash2_kernelI6__half.*Lb[01]ELb0E/ } keep' |
  gzip > "$out/flash2-sass.txt.gz" || echo "flash2_residency: no SASS listing" >&2
python3 "$here/flash2_residency.py" "$out" "$hbmlab" > "$out/flash2-residency.txt"
