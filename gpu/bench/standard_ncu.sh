#!/usr/bin/env bash
# standard attention's three kernels under Nsight Compute: where a CTA of qk_kernel, softmax_kernel
# and pv_kernel spends its time when the engine's bounds (HBM, L2, shared memory, the pipes) say
# the kernel should be faster than it runs (docs/design.md, "Where standard's kernels wait").
# hbmlab's standard, fp16, non-causal, B·H·N = 262,144 (H = 16): d = 64 at N = 1024 (64 × 64 and
# 128 × 128) and N = 4096 (64 × 64), d = 128 at N = 1024 and 4096 (64 × 64) — the shapes of
# assets/measurements/h100-standard-ncu.csv. Nsight Compute's full set (warp states, scheduler,
# occupancy, memory workload) and the sampled stall reasons by name, every launch of the record
# (--profile-pass: the record's launch between hbmlab_marker kernels); the kernels' SASS.
# Run: HBMLAB=build/hbmlab gpu/bench/standard_ncu.sh OUTDIR
#   writes OUTDIR/standard-raw-ncu.csv (every counter), OUTDIR/standard-ncu.csv (the columns
#   assets/measurements/h100-standard-stall-ncu.csv keeps), OUTDIR/standard-sass.txt.gz (the SASS
#   of the fp16 kernels) and OUTDIR/standard-sass-memory.txt (their global and shared-memory
#   instructions, barriers and shuffles in program order: assets/measurements/h100-standard-sass.txt).
set -uo pipefail
out=${1:?usage: standard_ncu.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
common=(--clock-control none --cache-control all --csv --page raw --print-units base --set full)
named=regex:smsp__pcsamp_warps_issue_stalled_,sm__cycles_elapsed.max,smsp__inst_executed.sum
kernels=regex:'qk_kernel|softmax_kernel|pv_kernel'
runs=(
  "--seq-len 1024 --head-dim 64 --blocks 64x64,128x128"
  "--seq-len 4096 --head-dim 64 --blocks 64x64"
  "--seq-len 1024,4096 --head-dim 128 --blocks 64x64"
)
n=0
for run in "${runs[@]}"; do
  # shellcheck disable=SC2086  # each run's options are words
  ncu "${common[@]}" --metrics "$named" -k "$kernels" --log-file "$out/run$n.csv" \
    "$hbmlab" measure --algo standard $run --heads 16 --causal no --dtype fp16 --profile-pass ||
    echo "standard_ncu: run $n ($run) failed" >&2
  n=$((n + 1))
done
kept=(  # the columns the kept table has (regular expressions)
  'Kernel Name' 'Block Size' 'Grid Size' 'gpu__time_duration\.sum' 'sm__cycles_elapsed\.max'
  'dram__bytes_read\.sum' 'dram__bytes_write\.sum'
  'dram__throughput\.avg\.pct_of_peak_sustained_elapsed' 'lts__t_bytes\.sum'
  'lts__t_sector_hit_rate\.pct' 'lts__throughput\.avg\.pct_of_peak_sustained_elapsed'
  'l1tex__data_pipe_lsu_wavefronts\.avg\.pct_of_peak_sustained_elapsed'
  'l1tex__data_pipe_lsu_wavefronts_mem_shared(_op_ld|_op_st)?\.sum' 'memory_l1_wavefronts_shared'
  'l1tex__data_bank_conflicts_pipe_lsu_mem_shared\.sum'
  'l1tex__throughput\.avg\.pct_of_peak_sustained_active' 'launch__registers_per_thread'
  'launch__occupancy_limit_.*' 'launch__waves_per_multiprocessor'
  'sm__warps_active\.avg\.pct_of_peak_sustained_active' 'smsp__inst_executed\.sum'
  'smsp__issue_active\.avg\.per_cycle_active' 'smsp__warps_eligible\.avg\.per_cycle_active'
  'smsp__warps_active\.avg\.per_cycle_active' 'smsp__average_warp_latency_per_inst_issued\.ratio'
  'smsp__pcsamp_warps_issue_stalled_.*' 'smsp__pcsamp_sample_count'
  'sm__pipe_tensor_cycles_active\.avg\.pct_of_peak_sustained_active'
)
keep="^($(IFS='|'; echo "${kept[*]}"))$"
logs=()
for ((i = 0; i < n; i++)); do logs+=("$out/run$i.csv"); done
python3 "$here/join_ncu_logs.py" standard_ncu "$out/standard-raw-ncu.csv" "$out/standard-ncu.csv" "$keep" "${logs[@]}"
cuobjdump -sass "$hbmlab" | awk '/Function :/ { keep = /(qk_kernel|softmax_kernel|pv_kernel)I6__half/ } keep' |
  gzip > "$out/standard-sass.txt.gz" || echo "standard_ncu: no SASS listing" >&2
zcat "$out/standard-sass.txt.gz" |
  awk '/Function :/ { print; next } /(LDG|STG|LDS|STS|LDSM|BAR|SHFL|MUFU)/ { sub(/;.*/, ""); sub(/^ +/, ""); print "  " $0 }' \
  > "$out/standard-sass-memory.txt"
