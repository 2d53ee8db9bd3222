#!/usr/bin/env python3
"""Same attention, same bytes, three memory layouts: PyTorch's SDPA flash backend on (B, H, N, d)
tensors as the calibration hands them, on the same bytes as one batch of B*H heads, and on
(B, N, H, d) tensors transposed to (B, H, N, d) as a model's projections produce them.

PyTorch's FlashAttention-2 launches its grid as (Q blocks, B, H), so with B > 1 the heads that run
together are H*N*d*2 bytes apart in (B, H, N, d) memory; with one batch they are neighbours. The
DRAM reads differ although the work, the order of the K/V blocks and the schedule do not.

Run under Nsight Compute by gpu/bench/sdpa_layout.sh; each launch sits in an NVTX range "sdpa"
after an unprofiled warm-up, in the order configs() gives, twice over.
  python3 sdpa_layout.py --run
  python3 sdpa_layout.py --merge NCU.csv OUT.json [DEVICE_NAME]
"""
import json
import sys

from merge_ncu import num, profiled_launch, read_rows, write_json

TOKENS, HEADS = 16384, 16  # B*N and H of the calibration's SDPA shapes up to N = 16K
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384]
LAYOUTS = {"bhnd": "(B, H, N, d) contiguous, as calibrated",
           "bhnd-one-batch": "the same bytes as (1, B*H, N, d)",
           "bnhd": "(B, N, H, d) contiguous, transposed to (B, H, N, d)"}
REPS = 2
BLOCK_M = 128  # Q rows per CTA of PyTorch's FlashAttention-2 forward at d = 64 and 128 on the H100


def configs():
    out = []
    for rep in range(REPS):
        for d in (64, 128):
            for causal in (False, True):
                for n in SEQ_LENS:
                    for layout in LAYOUTS:
                        b = TOKENS // n
                        out.append({"d": d, "causal": causal, "N": n, "B": b, "H": HEADS, "layout": layout,
                                    "rep": rep})
    return out


def tensors(c):
    import torch
    b, h, n, d = c["B"], c["H"], c["N"], c["d"]
    if c["layout"] == "bhnd":
        shape = (b, h, n, d)
    elif c["layout"] == "bhnd-one-batch":
        shape = (1, b * h, n, d)
    else:
        return [torch.randn(b, n, h, d, device="cuda", dtype=torch.float16).transpose(1, 2) for _ in range(3)]
    return [torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3)]


def run():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(1)
    for c in configs():
        q, k, v = tensors(c)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            profiled_launch(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"]))
        print(json.dumps(c), flush=True)
        del q, k, v


def merge(ncu_csv, out_path, device):
    rows = [r for r in read_rows(ncu_csv) if "flash_fwd" in r.get("Kernel Name", "")]
    cs = configs()
    if len(rows) != len(cs):
        sys.exit(f"sdpa_layout: {ncu_csv}: {len(rows)} flash kernels profiled, {len(cs)} expected")
    records = []
    for c, r in zip(cs, rows):
        grid = num(r["launch__grid_size"])
        if grid != -(-c["N"] // BLOCK_M) * c["B"] * c["H"]:
            sys.exit(f"sdpa_layout: {ncu_csv}: grid {grid} does not fit {c}")
        records.append({**c, "kernel": r["Kernel Name"][:120], "grid": r.get("Grid Size"),
                        "dram_read_bytes": num(r["dram__bytes_read.sum"]),
                        "l2_sm_read_bytes": 32 * num(r["lts__t_sectors_srcunit_tex_op_read.sum"]),
                        "time_ms": num(r["gpu__time_duration.sum"]) * 1e-6})
    doc = {"device": {"name": device}, "command": "gpu/bench/sdpa_layout.sh OUTDIR",
           "method": "torch SDPA flash backend, fp16, B*N = 16384, H = 16; one profiled launch per record "
                     "after an unprofiled warm-up, ncu --clock-control none --cache-control all (L2 flushed "
                     "before each); every configuration twice (rep 0, 1)",
           "layouts": LAYOUTS, "records": records}
    write_json(out_path, doc)
    print_table(records)


def print_table(records):
    print("DRAM read MB, mean of the reps (spread), PyTorch SDPA flash, B*N = 16384, H = 16")
    print(f"{'d':>4} {'mask':>6} {'N':>6} {'B':>3}" + "".join(f"{name:>22}" for name in LAYOUTS))
    keys = sorted({(r["d"], r["causal"], r["N"]) for r in records})
    for d, causal, n in keys:
        cells = []
        for layout in LAYOUTS:
            mb = [r["dram_read_bytes"] / 1e6 for r in records
                  if (r["d"], r["causal"], r["N"], r["layout"]) == (d, causal, n, layout)]
            cells.append(f"{sum(mb) / len(mb):14.1f} ({max(mb) - min(mb):4.1f})")
        print(f"{d:4d} {'causal' if causal else 'full':>6} {n:6d} {TOKENS // n:3d}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        run()
    elif sys.argv[1:2] == ["--merge"] and len(sys.argv) >= 4:
        merge(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
