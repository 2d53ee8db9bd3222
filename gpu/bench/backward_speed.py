# hbmlab's backward kernels (flash2's, and flash3's where a file has them) beside PyTorch SDPA's flash
# (FlashAttention-2) and cuDNN backward on the same problems, in TFLOP/s: 2.5 × 4·N²·d·B·H (the backward's five N²d products to the forward's two),
# halved when causal. Reads a `hbmlab measure --pass backward` file for hbmlab's times; times PyTorch's
# backward (torch.autograd.grad of one SDPA output, the forward run once beforehand) with CUDA events,
# a 256 MiB buffer written between repetitions as `hbmlab measure` flushes the L2. PyTorch's kernels
# take (B, N, H, d) memory: q, k, v made that way and viewed as (B, H, N, d) run its backward alone;
# made (B, H, N, d) contiguous (the "flash, BHND" column) they cost it two layout copies besides.
# Run: python3 gpu/bench/backward_speed.py OUT.json h100-backward.json [more measure files]   (prints markdown)
#      python3 gpu/bench/backward_speed.py --table OUT.json              (the table again, no GPU)
import json
import sys

from merge_ncu import write_json
from torch_timing import events_median_ms


def backward_flops(p):
    f = 2.5 * 4.0 * p["seq_len"] ** 2 * p["head_dim"] * p["batch"] * p["heads"]
    return f / 2 if p["causal"] else f


def sdpa_backward_ms(p, flush):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dt = torch.float16 if p["dtype"] == "fp16" else torch.bfloat16
    B, H, N, d = p["batch"], p["heads"], p["seq_len"], p["head_dim"]
    out = {}
    for name, backend, layout in (("flash", SDPBackend.FLASH_ATTENTION, "BNHD"),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION, "BNHD"),
                                  ("flash_bhnd", SDPBackend.FLASH_ATTENTION, "BHND")):
        if layout == "BNHD":
            q, k, v = (torch.randn(B, N, H, d, dtype=dt, device="cuda").transpose(1, 2).requires_grad_()
                       for _ in range(3))
        else:
            q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", requires_grad=True) for _ in range(3))
        try:
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"])
            dO = torch.randn_like(o)
            fn = lambda: torch.autograd.grad(o, (q, k, v), dO, retain_graph=True)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            out[name] = events_median_ms(fn, flush)
        except Exception as e:  # the backend does not take this shape
            out[name] = None
            out[name + "_why"] = str(e).splitlines()[0][:160]
    return out


def table_by_kernel(rows):
    """Rows of several hbmlab kernels ("hbmlab": {kernel: ms}): flash3 and flash2 beside PyTorch's."""
    names = [k for k in ("flash3", "flash2") if any(k in r["hbmlab"] for r in rows)]
    head = " | ".join(f"hbmlab {k} ms | TFLOP/s" for k in names)
    print(f"| dtype | d | N | B·H | causal | {head} | PyTorch flash ms | TFLOP/s | cuDNN ms | TFLOP/s "
          f"| {names[0]} ÷ cuDNN (speed) | {names[0]} ÷ flash (speed) |")
    print("|---" * (11 + 2 * len(names)) + "|")
    for r in rows:
        p, f = r["problem"], backward_flops(r["problem"])

        def cols(ms):
            return (f"{ms:.3f}", f"{f / (ms * 1e-3) / 1e12:.0f}") if ms else ("—", "—")

        flash, cudnn, first = r["sdpa"].get("flash"), r["sdpa"].get("cudnn"), r["hbmlab"].get(names[0])
        mine = " | ".join(" | ".join(cols(r["hbmlab"].get(k))) for k in names)
        print(f"| {p['dtype']} | {p['head_dim']} | {p['seq_len']} | {p['batch'] * p['heads']} | "
              f"{'yes' if p['causal'] else 'no'} | {mine} | {' | '.join(cols(flash))} | {' | '.join(cols(cudnn))} | "
              f"{f'{cudnn / first:.2f}' if cudnn and first else '—'} | {f'{flash / first:.2f}' if flash and first else '—'} |")


def table(rows):
    if rows and "hbmlab" in rows[0]:
        table_by_kernel(rows)
        return
    print("| dtype | d | N | B·H | causal | hbmlab ms | hbmlab TFLOP/s | PyTorch flash ms | TFLOP/s | cuDNN ms | TFLOP/s "
          "| hbmlab ÷ flash (speed) | flash, BHND ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p, f = r["problem"], backward_flops(r["problem"])

        def cols(ms):
            return (f"{ms:.3f}", f"{f / (ms * 1e-3) / 1e12:.0f}") if ms else ("—", "—")

        flash, cudnn = r["sdpa"].get("flash"), r["sdpa"].get("cudnn")
        ratio = f"{flash / r['ms']:.2f}" if flash else "—"
        bhnd = r["sdpa"].get("flash_bhnd")
        print(f"| {p['dtype']} | {p['head_dim']} | {p['seq_len']} | {p['batch'] * p['heads']} | "
              f"{'yes' if p['causal'] else 'no'} | {' | '.join(cols(r['ms']))} | {' | '.join(cols(flash))} | "
              f"{' | '.join(cols(cudnn))} | {ratio} | {f'{bhnd:.3f}' if bhnd else '—'} |")


def main():
    if sys.argv[1] == "--table":
        table(json.load(open(sys.argv[2]))["rows"])
        return
    import torch

    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush = lambda: flush_buf.add_(1)  # noqa: E731 (the 50 MB L2 keeps none of the last repetition)
    # One row per problem, each hbmlab kernel's median beside the others ("hbmlab": {kernel: ms}); with
    # one file of flash2 records, the rows of the flash2-only table.
    by_problem = {}
    for path in sys.argv[2:]:
        for rec in json.load(open(path))["records"]:
            if rec.get("pass") != "backward" or rec.get("time_ms_median") is None:
                continue
            key = json.dumps(rec["problem"], sort_keys=True)
            row = by_problem.setdefault(key, {"problem": rec["problem"], "blocks": {}, "hbmlab": {}})
            row["hbmlab"][rec["kernel"]] = rec["time_ms_median"]
            row["blocks"][rec["kernel"]] = rec["blocks"]
    rows = list(by_problem.values())
    for row in rows:
        row["sdpa"] = sdpa_backward_ms(row["problem"], flush)
        torch.cuda.empty_cache()
    if len(sys.argv) == 3 and all(list(r["hbmlab"]) == ["flash2"] for r in rows):
        rows = [{"kernel": "flash2 backward", "problem": r["problem"], "blocks": r["blocks"]["flash2"],
                 "ms": r["hbmlab"]["flash2"], "sdpa": r["sdpa"]} for r in rows]
    data = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(),
            "method": "CUDA events, median of 50 after 5 warm-ups, a 256 MiB buffer written between repetitions; "
                      "PyTorch: torch.autograd.grad of one F.scaled_dot_product_attention output under sdpa_kernel "
                      "(flash or cuDNN), q, k, v made (B, N, H, d) and viewed as (B, H, N, d) (flash_bhnd: made "
                      "(B, H, N, d) contiguous, which adds two layout copies); hbmlab: the measure file's median; "
                      "TFLOP/s = 2.5*4*N^2*d*B*H, halved when causal; hbmlab's kernels: each measure file's median "
                      "(rows[].hbmlab, by kernel)", "rows": rows}
    write_json(sys.argv[1], data)
    table(rows)


main()
