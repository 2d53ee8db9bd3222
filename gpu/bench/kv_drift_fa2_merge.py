#!/usr/bin/env python3
"""Sets FlashAttention-2's grid under a causal K/V sweep (gpu/bench/kv_drift_fa2.sh's OUTDIR) beside
hbmlab: for each shape and K/V order, the DRAM reads Nsight Compute counted, the same stamps replayed
through the engine's L2 (hbmlab_kv_drift_replay on the raw records: the preset's, and with other ways
a partition or one partition; and the preset's on an even-paced copy, every CTA from its GPU start at
the median tile time), and `hbmlab simulate --hbmlab-kernels` at the same shape and blocks (at
128 × 128 with the synthetic's launch, 96 KiB and 128 threads: two CTAs an SM; at 128 × 64 flash2's
own, which holds two as well); with each sweep's drift and SM-sharing figures.
Usage: kv_drift_fa2_merge.py OUTDIR BUILD_DIR   (BUILD_DIR holds hbmlab and gpu/hbmlab_kv_drift_replay;
       writes OUTDIR/h100-kv-drift-fa2.json and prints the table)"""
import json
import os
import struct
import subprocess
import sys

from merge_ncu import num, paired_launches, write_json

MB = 1e6
SHAPES = [(32, 8192), (16, 16384)]  # (B·H, N); hbmlab simulate takes them as B = B·H / 16, H = 16
KV_ROWS = [128, 64]                 # K/V tile rows (Bc)
REPLAYS = [("preset", []), ("ways 8", ["--ways", "8"]), ("ways 12", ["--ways", "12"]),
           ("ways 64", ["--ways", "64"]), ("one partition", ["--partitions", "1"])]


def replay(build, sides, record, extra):
    """DRAM read MB of one raw record through the engine's L2, nothing set aside."""
    text = subprocess.run([os.path.join(build, "gpu", "hbmlab_kv_drift_replay"), sides, record] + extra,
                          check=True, capture_output=True, text=True).stdout
    return float(text.strip().split("\n")[-1].split()[1])


def even_paced(src, dst):
    """A copy of a raw record (kv_drift.cu's write_raw) in which every CTA keeps the GPU's first stamp
    and SM but then steps at the sweep's median tile time: what the replay reads when no CTA drifts."""
    b = open(src, "rb").read()
    at = 36 + struct.unpack_from("i", b, 32)[0]
    ctas = struct.unpack_from("8i", b, 0)[1]
    out, recs = bytearray(b[:at]), []
    for _ in range(ctas):
        sm, steps, items = struct.unpack_from("3i", b, at)
        at += 12
        its = b[at:at + 8 * items]
        at += 8 * items
        recs.append((sm, steps, items, its, struct.unpack_from(f"{steps}Q", b, at)))
        at += 8 * steps
    gaps = sorted(st[x + 1] - st[x] for *_, st in recs for x in range(len(st) - 1))
    step = gaps[len(gaps) // 2]
    for sm, steps, items, its, st in recs:
        out += struct.pack("3i", sm, steps, items) + its + struct.pack(f"{steps}Q", *(st[0] + x * step for x in range(steps)))
    open(dst, "wb").write(out)


def engine(build, bh, n, bc, descending):
    cmd = [os.path.join(build, "hbmlab"), "simulate", "--algo", "flash2", "--gpu", "h100-sxm", "--batch", str(bh // 16),
           "--heads", "16", "--seq-len", str(n), "--head-dim", "128", "--causal", "--block-rows", "128",
           "--block-cols", str(bc), "--hbmlab-kernels", "--json"] + (["--kv-descending"] if descending else [])
    if bc == 128:  # the synthetic grid's launch: two CTAs an SM (the engine's own 128 × 128 launch takes one)
        cmd += ["--launch-smem-bytes", "98304", "--launch-threads", "128"]
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {"command": " ".join(["hbmlab"] + cmd[1:]), "dram_read_mb": round(d["dram"]["read_bytes"] / MB, 1),
            "predicted_us": round(d["time"]["predicted_s"] * 1e6, 1)}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("Usage: ")[1])
    out, build = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    sides = os.path.join(here, "../../assets/measurements/h100-l2-partition.json")
    sweeps = [json.loads(l) for l in open(os.path.join(out, "kv-drift-fa2.jsonl")) if l.strip()]
    os.makedirs(os.path.join(out, "even"), exist_ok=True)
    rows = []
    for kv in KV_ROWS:
        for bh, n in SHAPES:
            tag = f"h{bh}-n{n}-kv{kv}"
            runs, ncu = paired_launches(os.path.join(out, f"ncu-runs-{tag}.txt"), os.path.join(out, f"ncu-{tag}.csv"),
                                        "kv_fa2", "kv_drift_fa2_merge")
            for order in ("desc", "asc"):
                label = f"fa2-{order}-h{bh}-n{n}" + ("-kv64" if kv == 64 else "")
                gpu = [num(r["dram__bytes_read.sum"]) / MB for run, r in zip(runs, ncu) if run[1] == label]
                gpu_us = [num(r["gpu__time_duration.sum"]) / 1e3 for run, r in zip(runs, ncu) if run[1] == label]
                plain = [s for s in sweeps if s["record"]["label"] == label]
                raw = os.path.join(out, "raw", label + ".bin")
                even = os.path.join(out, "even", label + ".bin")
                even_paced(raw, even)
                rows.append({
                    "label": label, "bh": bh, "seq_len": n, "head_dim": 128, "kv_rows": kv, "kv_order": order,
                    "gpu_dram_read_mb": [round(x, 1) for x in gpu], "gpu_ncu_us": [round(x, 1) for x in gpu_us],
                    "event_us": [s["event_us"] for s in plain],
                    "replay_dram_read_mb": {name: replay(build, sides, raw, extra) for name, extra in REPLAYS},
                    "replay_even_paced_dram_read_mb": replay(build, sides, even, []),
                    "engine": engine(build, bh, n, kv, order == "desc"),
                    "sweeps": [s["record"] for s in plain],
                })
    doc = {"what": "FlashAttention-2's grid (one CTA a 128-row query block, two CTAs an SM, 128 threads, "
                   "128 x 128 or 128 x 64 fp16 K/V tiles) under a causal K/V sweep at d = 128 on the H100: "
                   "DRAM reads (ncu, two launches each) beside the engine's L2 on the GPU's own stamps "
                   "(hbmlab_kv_drift_replay, nothing set aside) and the engine (hbmlab simulate --hbmlab-kernels)",
           "made_by": "gpu/bench/kv_drift_fa2.sh OUTDIR (device); gpu/bench/kv_drift_fa2_merge.py OUTDIR BUILD_DIR",
           "rows": rows}
    write_json(os.path.join(out, "h100-kv-drift-fa2.json"), doc)
    print("DRAM read MB (d = 128, causal)   GPU (ncu, 2 launches)   replay: "
          + " / ".join(n for n, _ in REPLAYS) + "; even-paced   engine")
    for r in rows:
        rp = r["replay_dram_read_mb"]
        print(f"{r['label']:<25} {' '.join(f'{x:6.1f}' for x in r['gpu_dram_read_mb']):>13}   "
              + " / ".join(f"{rp[n]:.1f}" for n, _ in REPLAYS) + f"; {r['replay_even_paced_dram_read_mb']:.1f}"
              + f"   {r['engine']['dram_read_mb']:.1f}")
    print("\nEngine commands:")
    for r in rows:
        print(f"  {r['engine']['command']}  ->  {r['engine']['dram_read_mb']:.1f} MB, {r['engine']['predicted_us']:.1f} us"
              f" (GPU under ncu {' '.join(f'{x:.1f}' for x in r['gpu_ncu_us'])} us)")
    print("\nSweeps (first launch of each): tile time, neighbouring rows' drift, SM sharing")
    for r in rows:
        s = r["sweeps"][0]
        beyond = sum(b for k, b in enumerate(s["kv_reread_mb_by_reuse"]) if (k + 0.5) * s["reuse_bin_mib"] >= 18.75)
        print(f"{r['label']:<25} span {s['span_us']:.0f} us, CTA us/tile p10/p50/p90 "
              + "/".join(f"{x:.2f}" for x in s["cta_us_per_tile_p10_p50_p90"])
              + f"; |drift| p50/p90/max {'/'.join(f'{x:.1f}' for x in s['pair_abs_drift_us_p50_p90_max'])} us"
              + f" ({'/'.join(f'{x:.2f}' for x in s['pair_abs_drift_tiles_p50_p90'])} tiles p50/p90)"
              + f"; slower/faster CTA of an SM p50/p90 {'/'.join(f'{x:.3f}' for x in s['pair_speed_ratio_p50_p90'])}"
              + f"; CTAs running p50 {s['ctas_running_p10_p50_p90'][1]:.0f}, heads in use p50/max "
              + f"{s['heads_live_p50_p90_max'][0]:.0f}/{s['heads_live_p50_p90_max'][2]:.0f}"
              + f"; K/V re-reads at reuse >= 18.75 MiB {beyond:.0f} MB")


if __name__ == "__main__":
    main()
