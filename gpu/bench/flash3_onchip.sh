#!/usr/bin/env bash
# On-chip counters of the two Hopper forward kernels hbmlab reads as the flash3 room, under Nsight
# Compute: hbmlab's own flash3 kernel (gpu/flash3.cu) and PyTorch's cuDNN SDPA forward
# (sdpa_sm90_flash_fprop_wgmma), B = 1, H = 40, N = 6000, d = 128 and 64, fp16, causal and not.
# Writes two files `hbmlab validate` reads:
#   OUTDIR/h100-flash3-onchip.json  measurement records of hbmlab's flash3 (kernel "flash3")
#   OUTDIR/h100-cudnn-onchip.json   SDPA records of cuDNN's forward (backend "cudnn")
# each record with time and DRAM bytes of the one profiled launch and the on-chip counters:
# shared-memory load/store wavefronts, the wavefronts wgmma reads its operands by (all shared-memory
# wavefronts less the loads and stores), wgmma instructions, exponent-unit instructions and the
# tensor pipe's busy fraction. The raw CSVs stay beside them.
# Run: HBMLAB=build/hbmlab gpu/bench/flash3_onchip.sh OUTDIR
set -euo pipefail
out=${1:?usage: flash3_onchip.sh OUTDIR}
hbmlab=${HBMLAB:-hbmlab}
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_ldsm.sum,\
smsp__sass_inst_executed_op_shared_gmma.sum,sm__inst_executed_pipe_xu.sum,\
sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,launch__block_size,launch__grid_size,\
launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static
common=(--clock-control none --cache-control all --csv --page raw --print-units base --metrics "$metrics")
args=(measure --algo flash3 --seq-len 6000 --head-dim 128,64 --heads 40 --batch 1 --causal both --dtype fp16)
# Blocks and launch of each record from a normal run (its file); the counters from a profiled one,
# whose check launch comes before each record's launch (both profiled; the second is the record's).
"$hbmlab" "${args[@]}" --reps 5 --out "$out/flash3-timed.json" > "$out/flash3-timed.txt"
ncu "${common[@]}" -k regex:flash3 --log-file "$out/flash3-onchip-ncu.csv" "$hbmlab" "${args[@]}" --profile-pass > /dev/null
cat > "$out/cudnn_fwd.py" <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
for d in (128, 64):
    for causal in (False, True):
        q, k, v = (torch.randn(1, 40, 6000, d, device="cuda", dtype=torch.float16) for _ in range(3))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # warm-up
            torch.cuda.synchronize()
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
PY
ncu "${common[@]}" -k regex:sdpa_sm90_flash_fprop --log-file "$out/cudnn-onchip-ncu.csv" python3 "$out/cudnn_fwd.py"
python3 - "$out" <<'PY'
import csv, json, subprocess, sys
out = sys.argv[1]
def rows(name):
    lines = [l for l in open(f"{out}/{name}") if not l.startswith("==")]
    r = [x for x in csv.DictReader(lines) if x.get("ID", "").isdigit()]
    return r
def num(r, k):
    return float(str(r[k]).replace(",", ""))
def on_chip(r):
    ld, st = num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"), num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
    total = num(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
    return {"smem_ld_bytes": ld * 128, "smem_st_bytes": st * 128, "smem_mma_bytes": (total - ld - st) * 128,
            "mma_instructions": num(r, "smsp__sass_inst_executed_op_shared_gmma.sum"),
            "ldmatrix_instructions": num(r, "smsp__inst_executed_op_ldsm.sum"),
            "ex2_instructions": num(r, "sm__inst_executed_pipe_xu.sum"),
            "tensor_pipe_busy": num(r, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed") / 100}
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
name = gpu.split(",")[0].strip()
method = {"counters": "ncu --clock-control none --cache-control all (L2 flushed before each profiled kernel), "
                      "one profiled launch per record",
          "timing": "ncu gpu__time_duration of the one profiled launch (not a median of repetitions)",
          "on_chip": "smem_ld_bytes, smem_st_bytes: l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld/st.sum x 128 bytes; "
                     "smem_mma_bytes: the other shared-memory wavefronts (l1tex__data_pipe_lsu_wavefronts_mem_shared.sum "
                     "less loads and stores; wgmma's operand reads) x 128; mma_instructions: "
                     "smsp__sass_inst_executed_op_shared_gmma.sum (wgmma); ldmatrix_instructions: smsp__inst_executed_op_ldsm.sum; "
                     "ex2_instructions: sm__inst_executed_pipe_xu.sum; tensor_pipe_busy: "
                     "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100",
          "command": f"HBMLAB=build/hbmlab gpu/bench/flash3_onchip.sh OUT on {gpu}"}
timed = json.load(open(f"{out}/flash3-timed.json"))
profiled = rows("flash3-onchip-ncu.csv")
records = []
for n, rec in enumerate(timed["records"]):
    r = profiled[2 * n + 1]
    x = {k: rec[k] for k in ("kernel", "problem", "blocks") if k in rec}
    x["launch"] = {"threads_per_cta": int(num(r, "launch__block_size")),
                   "registers_per_thread": int(num(r, "launch__registers_per_thread")),
                   "smem_bytes_per_cta": int(num(r, "launch__shared_mem_per_block_dynamic") + num(r, "launch__shared_mem_per_block_static")),
                   "ctas": int(num(r, "launch__grid_size"))}  # the grid: fewer CTAs than tiles is v4, persistent
    x["time_ms_median"] = num(r, "gpu__time_duration.sum") * 1e-6
    x["reps"] = 1
    x["dram_read_bytes"] = num(r, "dram__bytes_read.sum")
    x["dram_write_bytes"] = num(r, "dram__bytes_write.sum")
    x.update(on_chip(r))
    records.append(x)
json.dump({"device": timed["device"], "method": method, "records": records}, open(f"{out}/h100-flash3-onchip.json", "w"), indent=1)
sdpa = []
shapes = [(128, False), (128, True), (64, False), (64, True)]
cudnn = rows("cudnn-onchip-ncu.csv")
for (d, causal), r in zip(shapes, cudnn[1::2]):
    k = {"kernel": r["Kernel Name"]}
    for m in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
              "launch__block_size", "launch__grid_size", "launch__registers_per_thread",
              "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static"):
        k[m] = num(r, m)
    rec = {"backend": "cudnn", "B": 1, "H": 40, "N": 6000, "d": d, "causal": causal, "dtype": "fp16", "ncu_kernels": [k]}
    rec.update(on_chip(r))
    sdpa.append(rec)
json.dump({"device": {"name": name}, "method": method | {"command": method["command"] + " (torch " + subprocess.run(
    ["python3", "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True).stdout.strip() + ")"},
           "sdpa": sdpa}, open(f"{out}/h100-cudnn-onchip.json", "w"), indent=1)
print(f"{len(records)} flash3 records, {len(sdpa)} cuDNN records")
PY
