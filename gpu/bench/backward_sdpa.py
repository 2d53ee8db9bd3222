# PyTorch SDPA's flash backward (FlashAttention-2's flash_bwd_dot_do_o, flash_bwd_dq_dk_dv_loop_seqk_parallel
# and flash_bwd_convert_dq kernels) over the sweep of `gpu/bench/backward.sh`, for `hbmlab validate`:
# each problem's backward once between hbmlab_marker kernels inside an NVTX range "sdpa", for Nsight
# Compute (--ncu-pass); without it, the shapes and the device only. merge_ncu.py joins the two into a
# calibration-style file whose "sdpa" records carry "pass": "backward" (sim/measure/validate.cpp, read_sdpa).
# --backend cudnn: cuDNN's backward instead (its own kernels, which validate reads as the flash3 backward room).
# Run: gpu/bench/backward.sh OUT sdpa   (python3 backward_sdpa.py --out shapes.json; ncu ... backward_sdpa.py --ncu-pass)
#      gpu/bench/flash3_backward.sh OUT cudnn   (the same with --backend cudnn)
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from calibrate_h100 import device_info
from merge_ncu import shape_marker, write_json

SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384]
HEAD_DIMS = [64, 128]
TOKENS = 256 * 1024  # B·H·N per run, as `hbmlab measure --tokens`
HEADS = 16


BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def shapes(seq_lens, head_dims, backend="flash"):
    out = []
    for d in head_dims:
        for N in seq_lens:
            bh = max(1, TOKENS // N)
            H = min(HEADS, bh)
            for causal in (False, True):
                out.append({"backend": backend, "B": bh // H, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16"})
    return out


def backward_of(s, seed):
    """q, k, v (B, H, N, d) contiguous, the backend's forward run once, and the backward as a function."""
    torch.manual_seed(seed)
    shape = (s["B"], s["H"], s["N"], s["d"])
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    with sdpa_kernel([BACKENDS[s["backend"]]]):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"])
    dO = torch.randn_like(o)
    return lambda: torch.autograd.grad(o, (q, k, v), dO, retain_graph=True)


def ncu_pass(all_shapes):
    """Each backward once inside NVTX range 'sdpa', after a marker kernel whose grid size is the
    shape's index + 1, so that merge_ncu.py can give the ncu rows to their shapes."""
    mark = shape_marker()
    for n, s in enumerate(all_shapes):
        backward = backward_of(s, n)
        backward()  # warm-up, unprofiled
        torch.cuda.synchronize()
        # Autograd runs a CUDA backward on a worker thread of its own, outside this thread's NVTX
        # range; with multithreading off it runs here, inside it.
        with torch.autograd.set_multithreading_enabled(False):
            torch.cuda.nvtx.range_push("sdpa")
            mark(n)
            backward()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        del backward
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="backward-sdpa-shapes.json")
    ap.add_argument("--ncu-pass", action="store_true")
    ap.add_argument("--backend", default="flash", choices=sorted(BACKENDS))
    ap.add_argument("--seq-lens", default=",".join(map(str, SEQ_LENS)))
    ap.add_argument("--head-dims", default=",".join(map(str, HEAD_DIMS)))
    args = ap.parse_args()
    all_shapes = shapes([int(x) for x in args.seq_lens.split(",")], [int(x) for x in args.head_dims.split(",")],
                        args.backend)
    if args.ncu_pass:
        ncu_pass(all_shapes)
        return
    write_json(args.out, {"device": device_info(),
                          "method": {"what": f"PyTorch SDPA {args.backend} backward: torch.autograd.grad of one "
                                             "F.scaled_dot_product_attention output (q, k, v (B, H, N, d) "
                                             "contiguous, fp16), the forward run once before",
                                     "time": "ncu gpu__time_duration.sum of each kernel, summed in validate"},
                          "sdpa_shapes": all_shapes,
                          "sdpa": [dict(s, **{"pass": "backward"}) for s in all_shapes]})


if __name__ == "__main__":
    main()
