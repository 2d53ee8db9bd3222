# hbmlab's split-KV decoding kernels beside PyTorch SDPA on the same decode steps, as effective K/V-cache
# bandwidth (the bytes of K and V each step must read, over the time), and beside the device's own
# copy bandwidth (a device-to-device copy of 1 GiB: read + write bytes over the time).
# Reads a `hbmlab measure --algo flash-decoding,... --query-len ...` file; times SDPA (flash backend
# where it takes the shape, else the default choice) with the L2 flushed between repetitions.
# Run: python3 gpu/bench/decode_speed.py OUT.json measure.json...   (prints markdown)
#      python3 gpu/bench/decode_speed.py --table OUT.json         (the table again, no GPU)
import json
import sys

from merge_ncu import write_json
from torch_timing import events_median_ms


def copy_bandwidth(flush):
    import torch

    src = torch.empty(1 << 29, dtype=torch.float16, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    ms = events_median_ms(lambda: dst.copy_(src), flush)
    return 2 * src.numel() * 2 / (ms * 1e-3)


def sdpa_ms(p, flush):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H, Hkv, N, Nq, d = p["batch"], p["heads"], p.get("kv_heads", p["heads"]), p["seq_len"], p.get("query_len", p["seq_len"]), p["head_dim"]
    dt = torch.float16 if p["dtype"] == "fp16" else torch.bfloat16
    q = torch.randn(B, H, Nq, d, dtype=dt, device="cuda")
    k = torch.randn(B, Hkv, N, d, dtype=dt, device="cuda")
    v = torch.randn(B, Hkv, N, d, dtype=dt, device="cuda")
    out = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=Hkv != H)
                fn()
                torch.cuda.synchronize()
                out[name] = events_median_ms(fn, flush)
        except Exception as e:  # the backend does not take this shape
            out[name] = None
            out[name + "_why"] = str(e).splitlines()[0][:160]
    return out


def kv_bytes(p):
    return 2 * p["batch"] * p.get("kv_heads", p["heads"]) * p["seq_len"] * p["head_dim"] * 2


def table(rows, copy_bw):
    print(f"copy bandwidth (device-to-device, read + write): {copy_bw / 1e12:.2f} TB/s\n")
    print("| kernel | B | H/HKV | NQ | N | splits | hbmlab µs | TB/s | % of copy | SDPA flash µs | SDPA cuDNN µs | SDPA best TB/s | hbmlab ÷ SDPA best time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["problem"]
        best = min([t for t in (r["sdpa"].get("flash"), r["sdpa"].get("cudnn"), r["sdpa"].get("efficient")) if t], default=None)
        tb = kv_bytes(p) / (r["ms"] * 1e-3) / 1e12
        def us(x):
            return f"{x * 1e3:.1f}" if x else "—"
        best_tb = f"{kv_bytes(p) / (best * 1e-3) / 1e12:.2f}" if best else "—"
        ratio = f"{r['ms'] / best:.2f}" if best else "—"
        print(f"| {r['kernel']} | {p['batch']} | {p['heads']}/{p.get('kv_heads', p['heads'])} | {p.get('query_len', p['seq_len'])} "
              f"| {p['seq_len']} | {p.get('splits', 1)} | {r['ms'] * 1e3:.1f} | {tb:.2f} | {100 * tb * 1e12 / copy_bw:.0f} % "
              f"| {us(r['sdpa'].get('flash'))} | {us(r['sdpa'].get('cudnn'))} | {best_tb} | {ratio} |")


def main():
    if sys.argv[1] == "--table":
        data = json.load(open(sys.argv[2]))
        table(data["rows"], data["copy_bandwidth_bytes_per_s"])
        return
    import torch

    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush = lambda: flush_buf.add_(1)  # noqa: E731 (touches 256 MiB: the 50 MB L2 holds none of the cache)
    records = [rec for path in sys.argv[2:] for rec in json.load(open(path))["records"]]
    copy_bw = copy_bandwidth(flush)
    rows, cache = [], {}
    for rec in records:
        if rec.get("time_ms_median") is None:
            continue
        p = rec["problem"]
        key = json.dumps({k: p[k] for k in p if k not in ("splits", "unified_max")}, sort_keys=True)
        if key not in cache:
            cache[key] = sdpa_ms(p, flush)
        rows.append({"kernel": rec["kernel"], "problem": p, "ms": rec["time_ms_median"], "sdpa": cache[key]})
    data = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_bandwidth_bytes_per_s": copy_bw,
            "method": "CUDA events, median of 50 after 5 warm-ups, a 256 MiB buffer written between repetitions; "
                      "SDPA with enable_gqa; K/V bytes = 2*B*HKV*N*d*2", "rows": rows}
    write_json(sys.argv[1], data)
    table(rows, copy_bw)


main()
