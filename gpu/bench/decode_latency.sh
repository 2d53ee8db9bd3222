#!/usr/bin/env bash
# Where a split-KV decode step's time goes (gpu/flash_decoding.cu), in one device call:
#   ncu                gpu__time_duration of the split kernel and the combine apart, for some recorded
#                      steps (B = 1 and 8; --cache-control all: K/V cold as in the records; none: the
#                      combine finds the partials in the L2, as it does in a step), for one CTA streaming
#                      1 to 64 K/V blocks alone (S = 1, one (batch, K/V head)), for 128 CTAs (S = 16)
#                      streaming 1 to 16 blocks each, and for the combine over S = 2 to 64 splits;
#   CUDA events        the same launches timed as the records are (split and combine together).
# Binaries built elsewhere in BIN, libraries in LIB; OUTDIR gets every log, the events-timed measurement
# files events-NAME.json (merged into assets/measurements/h100-decode-latency.json) and decode-latency.txt.
# Run: BIN=.carry/bin LIB=.carry/lib gpu/bench/decode_latency.sh OUTDIR
#   CASES=records-b1,records-b8,cta-blocks (the event overheads alone): only the cases named.
set -uo pipefail
out=${1:?usage: decode_latency.sh OUTDIR}
parts=all
source "$(dirname "$0")/device_env.sh"

common="--algo flash-decoding --query-len 1 --head-dim 128 --causal no"
# name|cache-control modes|measure arguments
cases=(
  "records-b1|all,none|--batch 1 --heads 32 --kv-heads 8 --seq-len 1024,4096,16384,131072"
  "records-b8|all,none|--batch 8 --heads 32 --kv-heads 8 --seq-len 1024,4096,16384"
  "cta-blocks|all|--batch 1 --heads 4 --kv-heads 1 --splits 1 --seq-len 64,128,256,512,1024,2048,4096"
  "grid-blocks|all|--batch 1 --heads 32 --kv-heads 8 --splits 16 --seq-len 1024,2048,4096,8192,16384"
)
for s in 2 4 8 16 32 64; do cases+=("combine-s$s|none|--batch 1 --heads 4 --kv-heads 1 --splits $s --seq-len 4096"); done
if [[ -n "${CASES:-}" ]]; then
  keep=()
  for c in "${cases[@]}"; do [[ ",$CASES," == *",${c%%|*},"* ]] && keep+=("$c"); done
  cases=("${keep[@]}")
fi
for c in "${cases[@]}"; do
  name=${c%%|*}; rest=${c#*|}; modes=${rest%%|*}; args=${rest#*|}
  for cc in ${modes//,/ }; do
    echo "== ncu ($cc): $name"
    ncu --clock-control none --cache-control "$cc" --kernel-name regex:"decode_|hbmlab_marker" \
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --page raw --print-units base \
        --log-file "$out/ncu-$name-$cc.csv" "$BIN/hbmlab" measure $common $args --profile-pass > "$out/ncu-$name-$cc.log" 2>&1
    echo "rc=$?"
  done
  echo "== events: $name"
  "$BIN/hbmlab" measure $common $args --counters none --reps 30 --out "$out/events-$name.json" > "$out/events-$name.log" 2>&1
  echo "rc=$?"
done

# One line per record: ncu's split and combine durations (the launch between the begin marker, block
# size 32, and the end marker, block size 64) and the CUDA-events time of the same launches.
python3 - "$out" "${cases[@]}" <<'PY' | tee "$out/decode-latency.txt"
import csv, io, json, os, sys
out, cases = sys.argv[1], sys.argv[2:]
def rows(path):
    if not os.path.exists(path): return []
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    return [r for r in csv.DictReader(io.StringIO(text[start:])) if r.get("ID", "").strip().isdigit()] if start >= 0 else []
def by_record(path):
    recs, cur = {}, None
    for r in rows(path):
        name, t = r["Kernel Name"], float(r["gpu__time_duration.sum"].replace(",", "")) / 1e3
        if "hbmlab_marker" in name:
            k = int(float(r["launch__grid_size"])) - 1
            cur = k if int(float(r["launch__block_size"])) == 32 else None
            continue
        if cur is not None:
            recs.setdefault(cur, []).append(("combine" if "combine" in name else "split", t))
    return recs
print(f"{'case':<12} {'N':>7} {'S':>3} {'CTAs':>5} | {'ncu split us':>12} {'combine':>8} | {'(cache none)':>12} {'combine':>8} | {'events us':>9}")
for c in cases:
    name, modes, _ = c.split("|")
    ev = json.load(open(f"{out}/events-{name}.json"))["records"] if os.path.exists(f"{out}/events-{name}.json") else []
    a, n = by_record(f"{out}/ncu-{name}-all.csv"), by_record(f"{out}/ncu-{name}-none.csv")
    for k, r in enumerate(ev):
        p = r["problem"]
        def cell(recs, kind):
            ts = [t for kk, t in recs.get(k, []) if kk == kind]
            return f"{ts[0]:.2f}" if ts else "-"
        print(f"{name:<12} {p['seq_len']:>7} {p.get('splits', 1):>3} {r['launch']['ctas']:>5} | {cell(a, 'split'):>12} {cell(a, 'combine'):>8} |"
              f" {cell(n, 'split'):>12} {cell(n, 'combine'):>8} | {r['time_ms_median'] * 1e3:>9.2f}")
PY
