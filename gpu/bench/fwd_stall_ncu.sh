#!/usr/bin/env bash
# Warp states of the flash2 forward under Nsight Compute: why a step of two 128-row CTAs per SM
# takes longer than their issued work at d = 128 and not at d = 64 (docs/design.md#the-sms-pipes).
# hbmlab's flash2 forward at every compiled block shape (d = 64: 128 × 128, 128 × 64, 64 × 64;
# d = 128: 128 × 64, 64 × 64, 128 × 32) and PyTorch's FlashAttention-2 forward, fp16, non-causal,
# B = 1, H = 40, N = 8192 (2,560 CTAs of 128 rows: about ten waves of two CTAs per SM).
# Nsight Compute's full set (warp-state statistics, scheduler statistics, occupancy, launch
# statistics, pipe utilisation, the warp-stall sampling) plus the sampled and averaged stall reasons
# by name; the kernels' SASS, and how far ahead of its reader each ldmatrix, exp2 and shuffle issues.
# Run: HBMLAB=build/hbmlab gpu/bench/fwd_stall_ncu.sh OUTDIR
#   writes OUTDIR/fwd-stall-raw-ncu.csv (every counter), OUTDIR/fwd-stall-ncu.csv (the columns
#   assets/measurements/h100-fwd-stall-ncu.csv keeps), OUTDIR/fwd-stall-sass.txt.gz (the SASS of
#   the non-causal fp16 kernels) and OUTDIR/fwd-stall-sass-distance.txt (sass_distance.py's reading
#   of it: assets/measurements/h100-fwd-stall-sass.txt).
set -uo pipefail
out=${1:?usage: fwd_stall_ncu.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
here=$(cd "$(dirname "$0")" && pwd)
n=${N:-8192}
mkdir -p "$out"
args=(measure --algo flash2 --seq-len "$n" --head-dim 64,128 --heads 40 --batch 1 --causal no --dtype fp16 --blocks all)
common=(--clock-control none --cache-control all --csv --page raw --print-units base --set full)
named=regex:smsp__pcsamp_warps_issue_stalled_,regex:smsp__average_warp_latency_issue_stalled_,sm__inst_executed_pipe_xu.sum,sm__pipe_tensor_cycles_active.sum,smsp__inst_executed.sum,sm__cycles_elapsed.max
cat > "$out/sdpa_fwd.py" <<PY
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
for d in (64, 128):
    q, k, v = (torch.randn(1, 40, $n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    print("sdpa flash forward", d, flush=True)
PY
# The record's launch follows its check launch: both are profiled, the second is the record.
profile() {  # profile LOG KERNEL-REGEX PROGRAM...: the named counters too, else the full set alone
  local log=$1 kernels=$2
  shift 2
  ncu "${common[@]}" --metrics "$named" -k "$kernels" --log-file "$log" "$@" ||
    { echo "fwd_stall_ncu: some named counters are unknown to this ncu; the full set alone" >&2
      ncu "${common[@]}" -k "$kernels" --log-file "$log" "$@"; }
}
profile "$out/hbmlab.csv" regex:flash2_kernel "$hbmlab" "${args[@]}" --profile-pass
profile "$out/torch.csv" regex:flash_fwd python3 "$out/sdpa_fwd.py"
kept=(  # the columns the kept table has (regular expressions)
  'Kernel Name' 'Block Size' 'Grid Size' 'gpu__time_duration\.sum' 'sm__cycles_elapsed\.max'
  'launch__registers_per_thread' 'launch__occupancy_limit_.*' 'launch__waves_per_multiprocessor'
  'sm__warps_active\.avg\.pct_of_peak_sustained_active' 'sm__maximum_warps_per_active_cycle_pct'
  'smsp__inst_executed\.sum' 'smsp__issue_active\.avg\.per_cycle_active'
  'smsp__warps_eligible\.avg\.per_cycle_active' 'smsp__warps_active\.avg\.per_cycle_active'
  'smsp__average_warp_latency_per_inst_issued\.ratio' 'smsp__pcsamp_warps_issue_stalled_.*'
  'smsp__pcsamp_sample_count' 'smsp__average_warp_latency_issue_stalled_.*'
  'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' 'sm__inst_executed_pipe_.*\.sum'
  'smsp__inst_executed_pipe_.*\.sum' 'sm__pipe_.*_cycles_active\.(sum'
  'avg\.pct_of_peak_sustained_active)' 'smsp__sass_inst_executed_op_local_.*\.sum'
  'l1tex__t_bytes_pipe_lsu_mem_local_op_.*\.sum'
)
keep="^($(IFS='|'; echo "${kept[*]}"))$"
python3 "$here/join_ncu_logs.py" fwd_stall_ncu "$out/fwd-stall-raw-ncu.csv" "$out/fwd-stall-ncu.csv" "$keep" \
  "$out/hbmlab.csv" "$out/torch.csv"
# The SASS of the non-causal, unmasked fp16 kernels, whole (gzip), for counting their instructions.
cuobjdump -sass "$hbmlab" | awk '/Function :/ { keep = /flash2_kernelI6__half.*Lb0ELb0E/ } keep' |
  gzip > "$out/fwd-stall-sass.txt.gz" || echo "fwd_stall_ncu: no SASS listing" >&2
zcat "$out/fwd-stall-sass.txt.gz" | python3 "$here/sass_distance.py" > "$out/fwd-stall-sass-distance.txt"
