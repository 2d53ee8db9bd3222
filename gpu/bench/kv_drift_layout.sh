#!/usr/bin/env bash
# Does where K and V lie change what FlashAttention-2's grid reads from DRAM? gpu/bench/kv_drift.cu
# --grid fa2, d = 128, causal, 128 × 128 K/V tiles descending, two launches each under Nsight Compute
# (DRAM counters, caches and clocks left alone), at B·H = 32, N = 8192 and B·H = 16, N = 16384, with
# each head's rows contiguous (the default), a head every head + 64 KiB, head + 1 MiB, 2 × head, and
# the heads' rows interleaved ([B, N, H, d]); the default ascending as a control. The work and the
# order of the tiles are the same in every run; only the addresses move.
# Prints one line a run: label, DRAM read MB of each launch, kernel time of each; packs
# OUTDIR/ncu-LABEL.csv, OUTDIR/runs-LABEL.txt (the sweeps' own figures) and OUTDIR/raw/ into one file,
# OUTDIR/kv-drift-layout-raw.tar.xz (the device hands back a limited number of files).
# Run: gpu/bench/kv_drift_layout.sh OUTDIR                  (builds with nvcc)
#      BIN=prebuilt/kv_drift gpu/bench/kv_drift_layout.sh OUTDIR
#      WORK=768 gpu/bench/kv_drift_layout.sh OUTDIR         every run the same work a tile (kv_drift --work):
#                                                           without it each process sizes its own to 6 µs,
#                                                           and the layouts' times are not comparable
set -uo pipefail
out=${1:?usage: kv_drift_layout.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/raw"
bin=${BIN:-$out/kv_drift}
[[ -n "${BIN:-}" ]] || nvcc -O3 -std=c++17 -arch=sm_90 -o "$bin" "$here/kv_drift.cu" || exit 1

# One process under ncu; prints `label  read MB a b  us a b` from its CSV (two kv_fa2 launches an order).
profile() {
  local tag=$1
  shift
  ncu --clock-control none --cache-control none -k regex:kv_fa2 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
      --csv --page raw --print-units base --log-file "$out/ncu-$tag.csv" \
      "$bin" run "$out" --grid fa2 --kv-rows 128 --reps 2 ${WORK:+--work "$WORK"} "$@" > "$out/runs-$tag.txt" 2>&1
  local rc=$?
  # The CSV's fields are quoted and joined by ","; numbers may carry thousands separators.
  awk -v rc=$rc -v tag="$tag" '
    /^"ID"/ { n = split(substr($0, 2, length($0) - 2), h, "\",\""); for (i = 1; i <= n; ++i) col[h[i]] = i; next }
    /kv_fa2/ && col["dram__bytes_read.sum"] {
      split(substr($0, 2, length($0) - 2), f, "\",\"")
      r = f[col["dram__bytes_read.sum"]]; t = f[col["gpu__time_duration.sum"]]; gsub(",", "", r); gsub(",", "", t)
      reads = reads sprintf(" %7.1f", r / 1e6); times = times sprintf(" %7.1f", t / 1e3); ++k
    }
    END { printf "%-30s DRAM read MB%s   us%s   (%d launches, rc %d)\n", tag, reads, times, k, rc }' "$out/ncu-$tag.csv"
  grep -h "^run \|^layout " "$out/runs-$tag.txt" | sed "s/^/    /"
}

for shape in "32 8192 2048" "16 16384 4096"; do
  read -r heads seq head_kib <<<"$shape"
  s="h$heads-n$seq"
  profile "$s-contiguous-desc" --heads "$heads" --seq "$seq" --kv-order desc
  profile "$s-pitch$((head_kib + 64))k-desc" --heads "$heads" --seq "$seq" --kv-order desc --head-pitch-kib $((head_kib + 64))
  profile "$s-pitch$((head_kib + 1024))k-desc" --heads "$heads" --seq "$seq" --kv-order desc --head-pitch-kib $((head_kib + 1024))
  profile "$s-pitch$((2 * head_kib))k-desc" --heads "$heads" --seq "$seq" --kv-order desc --head-pitch-kib $((2 * head_kib))
  profile "$s-bshd-desc" --heads "$heads" --seq "$seq" --kv-order desc --layout bshd
  profile "$s-contiguous-asc" --heads "$heads" --seq "$seq" --kv-order asc
done

cd "$out" && tar -cJf kv-drift-layout-raw.tar.xz raw ncu-*.csv runs-*.txt && rm -rf raw ncu-*.csv runs-*.txt
