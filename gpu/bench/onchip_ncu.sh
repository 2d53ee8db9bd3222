#!/usr/bin/env bash
# On-chip counters (shared memory, ldmatrix, tensor and exponent pipes) of attention forward
# kernels under Nsight Compute, to check the exact counts of `hbmlab simulate --json`'s `on_chip`:
# hbmlab's flash2 forward (B = 1, H = 40, N = 6000, d = 128 and 64, fp16, non-causal) and
# PyTorch's FlashAttention-2 and cuDNN SDPA backends on the same problems.
# Run: HBMLAB=build/hbmlab gpu/bench/onchip_ncu.sh OUTDIR
#   writes OUTDIR/onchip-hbmlab-ncu.csv, onchip-torch-ncu.csv (the full set, raw page) and
#   OUTDIR/onchip-named-ncu.csv (the counters `measurement` records name, where ncu knows them).
# HBMLAB=build/hbmlab gpu/bench/onchip_ncu.sh OUTDIR backward: the backward pass instead (d = 128),
#   hbmlab's three kernels and PyTorch's flash backward, the named counters only
#   (OUTDIR/onchip-backward-ncu.csv).
set -uo pipefail
out=${1:?usage: onchip_ncu.sh OUTDIR [backward]}
hbmlab=${HBMLAB:-hbmlab}
mkdir -p "$out"
common=(--clock-control none --cache-control all --csv --page raw --print-units base)
named=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_xu.sum,sm__pipe_tensor_cycles_active.sum,sm__cycles_elapsed.max,gpu__time_duration.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
if [[ "${2:-}" == backward ]]; then
  cat > "$out/sdpa_bwd.py" <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(1, 40, 6000, 128, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    o.backward(torch.randn_like(o))
torch.cuda.synchronize()
print("sdpa flash backward done", flush=True)
PY
  ncu "${common[@]}" --metrics "$named" -k 'regex:flash2_backward_kernel|dot_do_o_kernel|convert_dq_kernel' \
      --log-file "$out/onchip-backward-hbmlab-ncu.csv" "$hbmlab" measure --pass backward --algo flash2 --seq-len 6000 \
      --head-dim 128 --heads 40 --batch 1 --causal no --dtype fp16 --profile-pass
  ncu "${common[@]}" --metrics "$named" -k 'regex:flash_bwd' --log-file "$out/onchip-backward-torch-ncu.csv" \
      python3 "$out/sdpa_bwd.py"
  exit 0
fi
args=(measure --algo flash2 --seq-len 6000 --head-dim 128,64 --heads 40 --batch 1 --causal no --dtype fp16 --profile-pass)
# The record's launch follows its check launch: both are profiled, the second is the record.
ncu "${common[@]}" --set full -k regex:flash2_kernel --log-file "$out/onchip-hbmlab-ncu.csv" "$hbmlab" "${args[@]}"
cat > "$out/sdpa.py" <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
for backend, d in ((SDPBackend.FLASH_ATTENTION, 128), (SDPBackend.FLASH_ATTENTION, 64), (SDPBackend.CUDNN_ATTENTION, 128)):
    q, k, v = (torch.randn(1, 40, 6000, d, device="cuda", dtype=torch.float16) for _ in range(3))
    with sdpa_kernel(backend):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    print("sdpa", backend, d, flush=True)
PY
ncu "${common[@]}" --set full -k 'regex:flash_fwd|fprop|fmha|sdpa' --log-file "$out/onchip-torch-ncu.csv" python3 "$out/sdpa.py"
ncu "${common[@]}" --metrics "$named" -k regex:flash2_kernel --log-file "$out/onchip-named-ncu.csv" "$hbmlab" "${args[@]}" ||
  echo "onchip_ncu: some named counters are unknown to this ncu (see the full-set CSVs)"
python3 - "$out" <<'PY'
import csv, re, sys
keep = re.compile(r"(Kernel Name|gpu__time_duration.sum|shared|ldsm|hmma|gmma|tensor|pipe_xu|inst_executed.sum$|cycles_elapsed.max|cycles_active.max)")
for name in ("onchip-hbmlab-ncu.csv", "onchip-torch-ncu.csv", "onchip-named-ncu.csv"):
    try:
        rows = list(csv.DictReader(l for l in open(f"{sys.argv[1]}/{name}") if not l.startswith("==")))
    except OSError:
        continue
    print("==", name)
    for r in (r for r in rows if r.get("ID", "").isdigit()):
        print("--", r.get("Kernel Name", "")[:90])
        for k, v in r.items():
            if k and keep.search(k) and v not in ("", "n/a") and not k.endswith("pct") and "pct_of" not in k and ".per_" not in k:
                print(f"   {k} = {v}")
PY
