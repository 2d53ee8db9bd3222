#!/usr/bin/env bash
# On-chip counters of PyTorch's FlashAttention-2 (SDPA flash backend), forward and backward, under
# Nsight Compute, on a few of the calibration shapes: B = 1, H = 40, N = 6000 (d = 128 and 64, causal
# and not, as h100-onchip.json's hbmlab records) and four of calibration-h100.json's shapes.
# Writes OUTDIR/h100-sdpa-onchip.json, SDPA records (calibration format, "sdpa": [...]) that
# `hbmlab validate` reads as the flash2 and flash2 backward rooms read PyTorch's kernels, each with
# the on-chip counters summed over the record's flash kernels (the backward's three): shared-memory
# load/store wavefronts x 128, ldmatrix, mma.sync and exponent-unit instructions, tensor-pipe busy
# (of the main kernel). The raw CSV stays beside it (OUTDIR/sdpa-onchip-ncu.csv).
# Run: gpu/bench/sdpa_onchip.sh OUTDIR
set -euo pipefail
out=${1:?usage: sdpa_onchip.sh OUTDIR}
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,\
smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_xu.sum,\
sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,launch__block_size,launch__grid_size,\
launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static
cat > "$out/sdpa_onchip.py" <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from shapes import SHAPES
for B, H, N, d, causal in SHAPES:
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        o.backward(torch.randn_like(o))
    torch.cuda.synchronize()
    del q, k, v, o
PY
cat > "$out/shapes.py" <<'PY'
SHAPES = [(1, 40, 6000, 128, False), (1, 40, 6000, 128, True), (1, 40, 6000, 64, False), (1, 40, 6000, 64, True),
          (32, 16, 512, 128, False), (2, 16, 8192, 128, True), (8, 16, 2048, 64, False), (4, 16, 4096, 64, True)]
PY
(cd "$out" && ncu --clock-control none --cache-control all --csv --page raw --print-units base --metrics "$metrics" \
   -k 'regex:flash_fwd|flash_bwd' --log-file sdpa-onchip-ncu.csv python3 sdpa_onchip.py)
python3 - "$out" <<'PY'
import csv, json, subprocess, sys
sys.path.insert(0, sys.argv[1])
from shapes import SHAPES
out = sys.argv[1]
lines = [l for l in open(f"{out}/sdpa-onchip-ncu.csv") if not l.startswith("==")]
rows = [r for r in csv.DictReader(lines) if r.get("ID", "").isdigit()]
def num(r, k):
    return float(str(r[k]).replace(",", ""))
launch = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
          "launch__block_size", "launch__grid_size", "launch__registers_per_thread",
          "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static")
on_chip_of = {"smem_ld_bytes": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 128),
              "smem_st_bytes": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 128),
              "smem_fill_wavefront_bytes": ("smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum", 128),
              "smem_ld_bank_conflict_wavefronts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 1),
              "smem_st_bank_conflict_wavefronts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 1),
              "ld_shared_instructions": ("smsp__sass_inst_executed_op_shared_ld.sum", 1),
              "st_shared_instructions": ("smsp__sass_inst_executed_op_shared_st.sum", 1),
              "ldmatrix_instructions": ("smsp__inst_executed_op_ldsm.sum", 1),
              "mma_instructions": ("smsp__inst_executed_pipe_tensor_op_hmma.sum", 1),
              "ex2_instructions": ("sm__inst_executed_pipe_xu.sum", 1)}
def record(kernels, main, shape, pass_):
    B, H, N, d, causal = shape
    rec = {"backend": "flash", "B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16", "pass": pass_,
           "ncu_kernels": [{"kernel": r["Kernel Name"], "grid": r.get("Grid Size", ""), "block": r.get("Block Size", ""),
                            **{m: num(r, m) for m in launch}} for r in kernels]}
    for key, (metric, scale) in on_chip_of.items():
        rec[key] = sum(num(r, metric) for r in kernels) * scale
    rec["tensor_pipe_busy"] = num(main, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed") / 100
    return rec
sdpa, n = [], 0
for shape in SHAPES:  # per shape, in launch order: the forward, then the backward's three kernels
    fwd, bwd = rows[n], rows[n + 1:n + 4]
    n += 4
    assert "flash_fwd_kernel" in fwd["Kernel Name"] and all("flash_bwd" in r["Kernel Name"] for r in bwd), (shape, fwd["Kernel Name"])
    sdpa.append(record([fwd], fwd, shape, "forward"))
    sdpa.append(record(bwd, next(r for r in bwd if "dq_dk_dv" in r["Kernel Name"]), shape, "backward"))
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
torch_version = subprocess.run(["python3", "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True).stdout.strip()
method = {"counters": "ncu --clock-control none --cache-control all (L2 flushed before each profiled kernel), one profiled "
                      "launch per kernel, no warm-up (the counts do not depend on it)",
          "timing": "ncu gpu__time_duration of the one profiled launch, summed over the record's flash kernels",
          "on_chip": "summed over the record's flash kernels (the backward's flash_bwd_dot_do_o, flash_bwd_dq_dk_dv_loop and "
                     "flash_bwd_convert_dq): smem_ld_bytes, smem_st_bytes: l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld/st.sum "
                     "x 128 bytes; smem_fill_wavefront_bytes: cp.async (ldgsts) wavefronts x 128; *_bank_conflict_wavefronts: "
                     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld/st.sum; ld/st_shared_instructions: "
                     "smsp__sass_inst_executed_op_shared_ld/st.sum; ldmatrix_instructions: smsp__inst_executed_op_ldsm.sum; "
                     "mma_instructions: smsp__inst_executed_pipe_tensor_op_hmma.sum; ex2_instructions: "
                     "sm__inst_executed_pipe_xu.sum; tensor_pipe_busy: the main kernel's "
                     "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100",
          "command": f"gpu/bench/sdpa_onchip.sh OUT on {gpu} (torch {torch_version})"}
json.dump({"device": {"name": gpu.split(",")[0].strip()}, "method": method, "sdpa": sdpa},
          open(f"{out}/h100-sdpa-onchip.json", "w"), indent=1)
print(f"{len(sdpa)} SDPA records")
PY
