# The README's kernel-speed table: hbmlab flash2 (a `hbmlab measure` file) beside torch SDPA's
# flash and cuDNN backends (a calibrate_h100.py JSON) on the same shapes, from one device run.
# Run: python3 gpu/bench/speed_table.py hbmlab.json torch.json   (prints a markdown table)
import json
import sys


def main(hb_path, torch_path):
    hb = json.load(open(hb_path))
    th = json.load(open(torch_path))
    flushed = hb["method"].get("l2_flushed_between_reps", True)
    key_tf = "tflops_flushed" if flushed else "tflops"
    torch_rows = {}
    for r in th.get("sdpa", []):
        if key_tf in r:
            r = dict(r, tflops=r[key_tf])
            torch_rows[(r["backend"], r["N"], r["d"], r["causal"])] = r
    best, default = {}, {}
    for r in hb["records"]:
        if r["kernel"] != "flash2" or "tflops" not in r or r["problem"]["dtype"] != "fp16":
            continue
        p = r["problem"]
        key = (p["seq_len"], p["head_dim"], p["causal"])
        if key not in best or r["tflops"] > best[key]["tflops"]:
            best[key] = r
        if r["blocks"]["Br"] == 64 and r["blocks"]["Bc"] == 64:
            default[key] = r
    print("| d | N | causal | B×H | hbmlab flash2, best Br×Bc | hbmlab flash2, 64×64 | PyTorch flash | cuDNN "
          "| best / PyTorch flash | 64×64 / PyTorch flash |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (N, d, causal), r in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        f = torch_rows.get(("flash", N, d, causal))
        c = torch_rows.get(("cudnn", N, d, causal))
        bh = r["problem"]["batch"] * r["problem"]["heads"]
        ft = f"{f['tflops']:.0f}" if f else "–"
        ct = f"{c['tflops']:.0f}" if c else "–"
        ratio = f"{100 * r['tflops'] / f['tflops']:.0f} %" if f else "–"
        dr = default.get((N, d, causal))
        dt = f"{dr['tflops']:.0f}" if dr else "–"
        dratio = f"{100 * dr['tflops'] / f['tflops']:.0f} %" if (f and dr) else "–"
        print(f"| {d} | {N} | {'yes' if causal else 'no'} | {bh} | {r['tflops']:.0f} ({r['blocks']['Br']}×{r['blocks']['Bc']}) "
              f"| {dt} | {ft} | {ct} | {ratio} | {dratio} |")
    print("\nTFLOP/s = 4·N²·d·B·H / time (halved when causal); medians of CUDA-event times, fp16, "
          + ("L2 flushed between repetitions in both." if flushed else "warm L2 in both."))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
