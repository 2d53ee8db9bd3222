# gpu/README.md's flash3 speed table: each rung of flash3 (v1, v2, v3) beside hbmlab's flash2 and
# PyTorch SDPA's flash and cuDNN backends, from one device run of gpu/bench/flash3.sh.
# Run: python3 gpu/bench/flash3_table.py OUTDIR   (reads OUTDIR/speed-*.json; prints a markdown table)
import glob
import json
import os
import re
import sys


def records(path):
    out = {}
    for r in json.load(open(path))["records"]:
        if "tflops" not in r:
            continue
        p = r["problem"]
        out[(p["head_dim"], p["seq_len"], p["causal"])] = r
    return out


def main(folder):
    columns = {"flash2": {}}
    for path in sorted(glob.glob(os.path.join(folder, "speed-flash2-d*.json"))):
        columns["flash2"].update(records(path))
    for path in sorted(glob.glob(os.path.join(folder, "speed-flash3-v*-d*.json"))):
        v = re.search(r"-v(\d)-", path).group(1)
        columns.setdefault(f"flash3 v{v}", {}).update(records(path))
    torch_rows = {}
    tpath = os.path.join(folder, "speed-torch.json")
    if os.path.exists(tpath):
        for r in json.load(open(tpath))["sdpa"]:
            if "tflops" in r:
                torch_rows[(r["backend"], r["d"], r["N"], r["causal"])] = r
    names = sorted(k for k in columns if k.startswith("flash3")) + ["flash2"]
    keys = sorted(set().union(*(c.keys() for c in columns.values())))
    print("| d | N | causal | B×H | " + " | ".join(f"hbmlab {n}" for n in names)
          + " | PyTorch flash | cuDNN | best flash3 / cuDNN |")
    print("|---" * (5 + len(names) + 2) + "|")
    for d, N, causal in keys:
        any_rec = next(c[(d, N, causal)] for c in columns.values() if (d, N, causal) in c)
        bh = any_rec["problem"]["batch"] * any_rec["problem"]["heads"]
        cells = [f"{columns[n][(d, N, causal)]['tflops']:.0f}" if (d, N, causal) in columns[n] else "–" for n in names]
        f = torch_rows.get(("flash", d, N, causal))
        c = torch_rows.get(("cudnn", d, N, causal))
        best = max((columns[n][(d, N, causal)]["tflops"] for n in names
                    if n.startswith("flash3") and (d, N, causal) in columns[n]), default=None)
        ratio = f"{best / c['tflops']:.2f}" if (best and c) else "–"
        ft = f"{f['tflops']:.0f}" if f else "–"
        ct = f"{c['tflops']:.0f}" if c else "–"
        print(f"| {d} | {N} | {'yes' if causal else 'no'} | {bh} | " + " | ".join(cells) + f" | {ft} | {ct} | {ratio} |")
    print("\nTFLOP/s = 4·N²·d·B·H / time (halved when causal); fp16; medians of CUDA-event times with the L2 "
          "flushed before each repetition, all columns from the same device run.")


if __name__ == "__main__":
    main(sys.argv[1])
