# Block-sparse flash2 beside PyTorch's FlexAttention with the same block mask, on the same shapes:
# reads a `hbmlab measure --block-mask ...` file (hbmlab's kernel, checked against the fp64 masked
# reference, timed with the L2 flushed) and times torch's compiled flex_attention with a BlockMask
# built from the very pairs hbmlab kept (`hbmlab simulate --mask-out`), then prints the table.
# Run: python3 gpu/bench/block_sparse_speed.py HBMLAB_BIN measure.json OUT.json   (prints markdown)
#      python3 gpu/bench/block_sparse_speed.py --table OUT.json                 (the table again, no GPU)
import json
import os
import subprocess
import sys
import tempfile

from merge_ncu import write_json
from torch_timing import events_median_ms as timed

REPS, WARMUP = 30, 5


def events_median_ms(fn, flush):
    return timed(fn, flush, REPS, WARMUP)


def kept_pairs(hbmlab, p, blocks):
    """The block pairs hbmlab's flash2 visits, as a [Tr, Tc] bool tensor (its own mask file)."""
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mask.txt")
        args = [hbmlab, "simulate", "--gpu", "h100-sxm", "--algo", "flash2", "--seq-len", str(p["seq_len"]),
                "--head-dim", str(p["head_dim"]), "--block-rows", str(blocks["Br"]), "--block-cols", str(blocks["Bc"]),
                "--counts-only", "--mask-out", path]
        if p.get("block_mask"):
            args += ["--block-mask", p["block_mask"]]
        if p["causal"]:
            args += ["--causal"]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        rows = [line.strip() for line in open(path) if line.strip()]
    return torch.tensor([[c == "1" for c in r] for r in rows], dtype=torch.bool, device="cuda")


# The mask_mods read these globals, so that one compiled kernel serves every mask of a shape: the
# kept pairs are copied into KEPT rather than captured anew (a new closure would recompile).
KEPT, BR, BC = None, 128, 128


def kept_mod(b, h, q, kv):
    return KEPT[q // BR, kv // BC]


def kept_causal_mod(b, h, q, kv):
    return KEPT[q // BR, kv // BC] & (kv <= q)


def main(hbmlab, measure_path, out_path):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    global KEPT, BR, BC
    torch._dynamo.config.cache_size_limit = 64
    records = [r for r in json.load(open(measure_path))["records"] if r["kernel"] == "flash2" and "time_ms_median" in r]
    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush = lambda: flush_buf.zero_()
    flex = torch.compile(flex_attention, dynamic=False)
    rows = []
    for r in records:
        p, blocks = r["problem"], r["blocks"]
        B, H, N, d = p["batch"], p["heads"], p["seq_len"], p["head_dim"]
        dtype = torch.float16 if p["dtype"] == "fp16" else torch.bfloat16
        kept = kept_pairs(hbmlab, p, blocks)
        BR, BC, causal = blocks["Br"], blocks["Bc"], p["causal"]
        if KEPT is None or KEPT.shape != kept.shape:
            KEPT = kept.clone()
        else:
            KEPT.copy_(kept)
        mask_mod = kept_causal_mod if causal else kept_mod

        row = {"problem": p, "blocks": blocks, "density": p.get("density", 1.0),
               "hbmlab_ms": r["time_ms_median"], "kept_pairs": int(kept.sum())}
        try:
            mask = create_block_mask(mask_mod, None, None, N, N, device="cuda", BLOCK_SIZE=(BR, BC))
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
            row["flex_ms"] = events_median_ms(lambda: flex(q, k, v, block_mask=mask), flush)
        except Exception as e:  # one shape's failure is a row that says so, not a lost table
            row["flex_error"] = repr(e)[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_json(out_path, {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows})
    print_table(rows)


def print_table(rows):
    dense = {}
    for r in rows:
        p = r["problem"]
        if not p.get("block_mask"):
            dense[(p["seq_len"], p["head_dim"], p["causal"], p["dtype"])] = r
    print("| d | N | causal | mask | kept pairs ÷ dense's | hbmlab ms | ÷ dense | Flex ms | hbmlab / Flex speed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["problem"]["head_dim"], r["problem"]["seq_len"], r["problem"]["causal"], -r["density"])):
        p = r["problem"]
        base = dense.get((p["seq_len"], p["head_dim"], p["causal"], p["dtype"]))
        ratio = f"{r['hbmlab_ms'] / base['hbmlab_ms']:.2f}" if base else "–"
        s = f"{r['kept_pairs'] / base['kept_pairs']:.3f}" if base else "–"
        flex_ms = f"{r['flex_ms']:.3f}" if "flex_ms" in r else "failed"
        speed = f"{r['flex_ms'] / r['hbmlab_ms']:.2f}×" if "flex_ms" in r else "–"
        print(f"| {p['head_dim']} | {p['seq_len']} | {'yes' if p['causal'] else 'no'} | {p.get('block_mask', 'dense')} "
              f"| {s} | {r['hbmlab_ms']:.3f} | {ratio} | {flex_ms} | {speed} |")
    print("\nkept pairs ÷ dense's: the density s against the same problem without the mask (causal or not). "
          "÷ dense: hbmlab's time over its own dense time of that problem (the aim: at most s + 0.1 for s ≤ 0.3). "
          "Speed = Flex time / hbmlab time (above 1: hbmlab is faster; the aim: at least 0.9). Medians of 30 "
          "CUDA-event times, L2 flushed before each, fp16, B·H·N = 262144, H = 16.")


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        print_table(json.load(open(sys.argv[2]))["rows"])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3])
