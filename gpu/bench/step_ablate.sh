#!/usr/bin/env bash
# Where flash2's forward step spends its cycles (step_ablate.cu): the kernel's step from shared memory
# alone, and with one part taken out or doubled at a time, at d = 128, 128 × 64 and 128 × 32 and
# d = 64, 128 × 128; beside it, the real kernel's cycles a step at the same shapes under Nsight
# Compute (sm__cycles_elapsed.max over an SM's steps, as fwd_stall_ncu.sh's problem: B = 1, H = 40,
# N = 8192, not causal), and the SASS counts of each synthetic variant (HMMA, MUFU.EX2, LDSM, BAR,
# SHFL, FMUL, local loads and stores in the step's loop), so each variant is seen to do what it says.
# Run: [STEP_ABLATE=prebuilt binary] HBMLAB=build/hbmlab gpu/bench/step_ablate.sh OUTDIR
#   or: [STEP_ABLATE=prebuilt sweep binary] SWEEP=1 gpu/bench/step_ablate.sh OUTDIR: the exps swept at fixed
#   MMAs (step_ablate.cu built with -DSTEP_ABLATE_SWEEP: 0 to 2 times the kernel's exps a score, 2 and 1
#   CTAs an SM, without and with the fills), written to OUTDIR/step-overlap.txt with its SASS counts
#   writes OUTDIR/step-ablate.txt (the timings, then the SASS counts: assets/measurements/h100-step-ablate.txt),
#   OUTDIR/step-ablate-sass.txt (the SASS counts alone) and OUTDIR/step-ablate-sass-full.txt.gz (the listing)
set -uo pipefail
out=${1:?usage: step_ablate.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
bin=${STEP_ABLATE:-}
sweep=${SWEEP:-}
name=step-ablate
[[ -n $sweep ]] && name=step-overlap
if [[ -z $bin ]]; then
  bin=$out/$name
  nvcc -O3 -std=c++17 -I"$root" ${sweep:+-DSTEP_ABLATE_SWEEP} -gencode arch=compute_90a,code=sm_90a -o "$bin" \
    "$here/step_ablate.cu" || exit 1
fi
{
  if [[ -n $sweep ]]; then
    echo "# SWEEP=1 gpu/bench/step_ablate.sh OUTDIR ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
    echo "# the synthetic step with its scores' exps swept (step_ablate.cu, -DSTEP_ABLATE_SWEEP): variant c2/c1 = 2/1 CTAs"
    echo "# an SM, fills = with the kernel's K/V cp.async, eX = X times the kernel's exps a score (MMAs, ldmatrix the same)"
  else
    echo "# HBMLAB=build/hbmlab gpu/bench/step_ablate.sh OUTDIR ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
  fi
  echo "# the synthetic step (step_ablate.cu): cycles a step = one CTA's clock64 cycles over its 1,024 steps;"
  echo "# CTAs = CTAs resident on every SM (the SM's step runs that many block pairs), CTAs/SM = min-max by %smid"
  "$bin"
} | tee "$out/$name.txt"

# The SASS of each variant: counts in the step's loop (from the first to the last HMMA; LDSM and BAR
# over the whole kernel less the fills before the loop).
sass=$(mktemp)
cuobjdump -sass "$bin" > "$sass"
python3 - "$sass" <<'PY' | tee "$out/$name-sass.txt"
import re, sys
text = open(sys.argv[1]).read()
cols = ("HMMA", "MUFU.EX2", "LDSM", "BAR", "SHFL", "FMUL", "FFMA", "LDL", "STL", "LDGSTS", "STS")
print("# SASS a variant (d, Bc, flags, min CTAs[, exps in quarters of the kernel's]): HMMA, MUFU.EX2, SHFL, FMUL, FFMA, LDL, STL from its loop's first to")
print("# last HMMA; LDSM, BAR, LDGSTS, STS over the whole kernel (no_ldmatrix: 3 LDSM before the loop; BAR: 2 outside it)")
print(f"{'kernel':<22}" + "".join(f"{c:>9}" for c in cols))
for fn in re.split(r"\n\s*Function : ", text)[1:]:
    m = re.search(r"step_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E(?:Li(\d+)E)?", fn.split("\n", 1)[0])
    if not m:
        continue
    ops = [re.sub(r"^@!?U?P\w+\s+", "", b.strip()).split()[0]
           for b in re.findall(r"/\*[0-9a-f]{4,5}\*/\s+([^;]*);", fn)]
    h = [i for i, o in enumerate(ops) if o.startswith("HMMA")]
    loop = ops[h[0]:h[-1] + 1] if h else []
    count = lambda seq, p: sum(1 for o in seq if o == p or o.startswith(p + "."))
    whole = {"LDSM", "BAR", "LDGSTS", "STS"}
    key = [g for g in m.groups() if g is not None]
    if len(key) == 5 and key[4] == "4":
        key = key[:4]
    print(f"{' '.join(key):<22}" + "".join(f"{count(ops if c in whole else loop, c):>9}" for c in cols))
PY
gzip -c "$sass" > "$out/$name-sass-full.txt.gz"
rm -f "$sass"

# The real kernel at the same shapes: sm__cycles_elapsed.max (the slowest SM) over its steps, a step
# being 2 CTAs' block pairs (2,560 CTAs of 128 rows, N / Bc pairs each, over 132 SMs × 2).
if [[ -n ${HBMLAB:-} && -z $sweep ]]; then
  ncu --clock-control none --metrics sm__cycles_elapsed.max,sm__cycles_elapsed.avg,gpu__time_duration.sum \
      -k regex:flash2_kernel --csv --page raw --print-units base --log-file "$out/real-ncu.csv" \
      "$HBMLAB" measure --algo flash2 --seq-len 8192 --head-dim 64,128 --heads 40 --batch 1 --causal no \
      --dtype fp16 --blocks all --profile-pass > "$out/real-measure.log" 2>&1 || echo "step_ablate: ncu failed" >&2
  python3 - "$out/real-ncu.csv" "$here" <<'PY' | tee -a "$out/step-ablate.txt"
import re, sys
sys.path.insert(0, sys.argv[2])
import merge_ncu  # the ncu CSV reader every calibration script uses
rows = merge_ncu.read_rows(sys.argv[1])
num = lambda r, k: merge_ncu.num(r[k])
sms = 132
print("# the real kernel (hbmlab measure --algo flash2 --seq-len 8192 --heads 40 --batch 1 --causal no, under ncu):")
print(f"{'d':<5} {'Br':<4} {'Bc':<4} {'cyc/step (max SM)':>18} {'(avg SM)':>9} {'MHz':>6}")
for r in rows:
    m = re.search(r"flash2_kernel<__half, (\d+), (\d+), (\d+), 0, 0>", r["Kernel Name"])
    if not m: continue
    d, br, bc = map(int, m.groups())
    if br != 128: continue  # two CTAs an SM: the 128-row kernels
    ctas = 8192 // br * 40
    steps = ctas * (8192 // bc) / (sms * 2)
    mx, av, ns = num(r, "sm__cycles_elapsed.max"), num(r, "sm__cycles_elapsed.avg"), num(r, "gpu__time_duration.sum")
    print(f"{d:<5} {br:<4} {bc:<4} {mx / steps:>18.0f} {av / steps:>9.0f} {mx / ns * 1e3:>6.0f}")
PY
fi
cat "$out/$name-sass.txt" >> "$out/$name.txt"
