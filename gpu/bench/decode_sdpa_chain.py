# PyTorch SDPA's decode split kernel (FlashAttention-2's flash_fwd_splitkv_kernel, 64 x 128 tiles at
# d = 128) with few K/V blocks a CTA, to measure the chain a CTA runs beside its blocks: one K/V head
# with 4 query heads packed into its rows (B = 1, H = 4, HKV = 1), caches of 128 (one CTA, one block,
# flash_fwd_kernel: PyTorch runs no split at S = 1), 256 and 1K (S = 2 and 8 CTAs of one block) and
# 16K to 256K (S = 128, 128, 128, 114, 114: 1, 2, 4, 9 and 18 blocks a CTA, one CTA an SM). PyTorch
# picks S from the cache (its num_splits_heuristic); the grid's y says which S it took.
# Run: gpu/bench/decode_sdpa_chain.sh OUTDIR   (ncu, then --merge: OUTDIR/h100-decode-sdpa-chain.json)
import decode_calibrate
from merge_ncu import kernels_by_marker, ncu_pass_or_merge, write_json


def shapes():
    return [{"backend": "flash", "B": 1, "H": 4, "HKV": 1, "NQ": 1, "N": n, "d": 128, "dtype": "fp16"}
            for n in (128, 256, 1024, 16384, 32768, 65536, 131072, 262144)]


def merge(ncu_csv, out_path):
    import torch
    ss = shapes()
    ks = kernels_by_marker(ncu_csv, len(ss))
    print(f"{'N':>7} {'grid':>12} {'blocks/CTA':>10} | {'split us':>9} {'combine us':>10}")
    for k, s in enumerate(ss):
        split = [x for x in ks[k] if "combine" not in x["kernel"]]
        comb = [x for x in ks[k] if "combine" in x["kernel"]]
        grid = split[0]["grid"] if split else "-"
        try:
            S = int(grid.strip("()").split(",")[1])
        except (AttributeError, IndexError, ValueError):
            S = 1
        blocks = -(-(s["N"] // 128) // S)
        t = lambda xs: f"{xs[0]['gpu__time_duration.sum'] / 1e3:.2f}" if xs else "-"  # noqa: E731
        print(f"{s['N']:>7} {grid:>12} {blocks:>10} | {t(split):>9} {t(comb):>10}   {split[0]['kernel'][:60] if split else ''}")
    doc = {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__},
           "method": {"counters": "ncu --clock-control none --cache-control all (L2 flushed before each profiled "
                                  "kernel), one profiled call per shape after an unprofiled warm-up; every kernel "
                                  "between the shape's marker and the next is the shape's",
                      "command": "gpu/bench/decode_sdpa_chain.sh OUTDIR",
                      "backend": "torch.nn.functional.scaled_dot_product_attention, SDPBackend.FLASH_ATTENTION, "
                                 "enable_gqa; fp16 randn inputs"},
           "sdpa_decode": [dict(s, ncu_kernels=ks[k]) for k, s in enumerate(ss)]}
    write_json(out_path, doc)
    print(f"wrote {out_path}")


def ncu_pass():
    decode_calibrate.shapes = shapes  # decode_calibrate's launches, these shapes
    decode_calibrate.ncu_pass()


def main():
    ncu_pass_or_merge("decode_sdpa_chain.py: --ncu-pass (under ncu) or --merge NCU_CSV OUT_JSON", ncu_pass,
                      lambda args: merge(*args.merge))


if __name__ == "__main__":
    main()
