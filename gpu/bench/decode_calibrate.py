# PyTorch SDPA's decode kernels (the flash backend: FlashAttention-2's split-KV kernel and its
# combine) under Nsight Compute, for calibrating and validating hbmlab's flash-decoding room.
# Decode steps: 1 to 8 query rows against caches of 1K to 128K, grouped-query (8 K/V heads for 32
# or 64 query heads) and multi-head, several batches. Each shape runs once unprofiled, then once
# inside an NVTX range "sdpa" after a marker kernel whose grid size is the shape's index + 1.
# Run: gpu/bench/decode_calibrate.sh OUTDIR   (ncu, then this script's --merge: OUTDIR/h100-decode-sdpa-ncu.json)
from merge_ncu import kernels_by_marker, ncu_pass_or_merge, profiled_launch, shape_marker, write_json


def shapes():
    out = []

    def add(B, H, Hkv, Nq, Ns, d=128):
        for N in Ns:
            out.append({"backend": "flash", "B": B, "H": H, "HKV": Hkv, "NQ": Nq, "N": N, "d": d, "dtype": "fp16"})

    full = [1024, 4096, 16384, 32768, 131072]
    add(1, 32, 8, 1, full)            # Llama-3-8B: 4 query heads per K/V head
    add(8, 32, 8, 1, full)
    add(1, 64, 8, 1, [4096, 32768, 131072])   # Llama-3-70B's grouping: 8 per K/V head
    add(1, 32, 8, 1, [4096, 32768, 131072], d=64)
    for nq in (1, 4, 8):              # multi-head attention, 1 to 8 query rows
        add(1, 32, 32, nq, [1024, 16384, 131072])
    add(4, 32, 32, 8, [4096, 32768])
    add(1, 32, 8, 4, [32768, 131072])  # grouped with 4 rows: PyTorch's kernel does not pack the group
    return out


def run(s, profiled, mark=None, k=0):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(k)
    q = torch.randn(s["B"], s["H"], s["NQ"], s["d"], device="cuda", dtype=torch.float16)
    kk = torch.randn(s["B"], s["HKV"], s["N"], s["d"], device="cuda", dtype=torch.float16)
    v = torch.randn_like(kk)
    fn = lambda: F.scaled_dot_product_attention(q, kk, v, enable_gqa=s["HKV"] != s["H"])  # noqa: E731
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        if profiled:
            profiled_launch(fn, mark, k)
        else:
            fn()  # a warm-up only
            torch.cuda.synchronize()


def ncu_pass():
    mark = shape_marker()
    for k, s in enumerate(shapes()):
        try:
            run(s, True, mark, k)
        except Exception as e:  # noqa: BLE001 - a shape the backend refuses is left out, and said so
            print(f"[ncu-pass] shape {k} {s} skipped: {e!r}"[:300], flush=True)


def merge(ncu_csv, out_path):
    import torch
    ss = shapes()
    kernels = kernels_by_marker(ncu_csv, len(ss))
    records = []
    for k, s in enumerate(ss):
        rec = dict(s)
        rec["ncu_kernels"] = kernels[k]
        if not kernels[k]:
            rec["error"] = "no profiled kernels (the backend refused the shape?)"
        records.append(rec)
        ks = kernels[k]
        print(f"[merge] B={s['B']} H={s['H']}/{s['HKV']} NQ={s['NQ']} N={s['N']} d={s['d']}: " +
              "; ".join(f"{x['kernel'][:60]} grid {x['grid']} {x['gpu__time_duration.sum'] / 1e3:.1f} us" for x in ks))
    doc = {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__},
           "method": {"counters": "ncu --clock-control none --cache-control all (L2 flushed before each profiled "
                                  "kernel), one profiled call per shape after an unprofiled warm-up; every kernel "
                                  "between the shape's marker and the next is the shape's",
                      "command": "gpu/bench/decode_calibrate.sh OUTDIR",
                      "backend": "torch.nn.functional.scaled_dot_product_attention, SDPBackend.FLASH_ATTENTION, "
                                 "enable_gqa when HKV < H; fp16 randn inputs"},
           "sdpa_decode": records}
    write_json(out_path, doc)
    print(f"wrote {out_path}: {sum(1 for r in records if r['ncu_kernels'])} of {len(records)} shapes profiled")


def main():
    ncu_pass_or_merge("decode_calibrate.py: --ncu-pass (under ncu) or --merge NCU_CSV OUT_JSON; see decode_calibrate.sh",
                      ncu_pass, lambda args: merge(*args.merge))


if __name__ == "__main__":
    main()
