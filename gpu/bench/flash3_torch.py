# PyTorch SDPA's flash and cuDNN backends on flash3's speed-table shapes (FlashAttention-3's paper:
# B·N = 16K tokens, H = 16 at d = 128 and 32 at d = 64), fp16, timed as `hbmlab measure` times:
# CUDA events, median, the L2 flushed (256 MiB written) before each repetition.
# Run: python3 gpu/bench/flash3_torch.py --out torch.json [--seq-lens 2048,4096,8192,16384]
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from merge_ncu import write_json
from torch_timing import events_median_ms

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
TOKENS = 16384
HEADS = {64: 32, 128: 16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq-lens", default="2048,4096,8192,16384")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for d in (64, 128):
        for N in map(int, args.seq_lens.split(",")):
            B, H = max(1, TOKENS // N), HEADS[d]
            torch.manual_seed(N + d)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
            for causal in (False, True):
                for name, backend in BACKENDS.items():
                    row = {"backend": name, "B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16"}
                    try:
                        with sdpa_kernel([backend]):
                            ms = events_median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                                  flush_buf.zero_, reps=args.reps, warmup=3)
                        flops = 4.0 * N * N * d * B * H / (2 if causal else 1)
                        row.update({"median_ms": ms, "tflops": flops / (ms * 1e-3) / 1e12})
                    except Exception as e:  # noqa: BLE001 - a backend that refuses a shape is recorded as such
                        row["error"] = repr(e)[:300]
                    rows.append(row)
                    print(f"[sdpa] {name:5s} d={d:3d} N={N:6d} B={B:2d} H={H:2d} causal={int(causal)} -> "
                          + (f"{row['median_ms']:.3f} ms {row['tflops']:.1f} TFLOP/s" if "tflops" in row
                             else row["error"]), flush=True)
            del q, k, v
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(),
            "method": "CUDA events, median of %d after 3 warm-ups, L2 flushed (256 MiB) before each" % args.reps}
    write_json(args.out, {"meta": meta, "sdpa": rows})  # whole or not at all, as every measurement file


if __name__ == "__main__":
    main()
