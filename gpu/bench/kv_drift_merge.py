#!/usr/bin/env python3
"""Joins kv_drift's sweeps (the plain pass's records: speed, drift, reuse distances; the ncu pass's
`run` lines) with Nsight Compute's DRAM counters, one kv_sweep row per `run` line, and prints the
synthetic sweep's DRAM reads against the L2 set aside beside cuDNN's forward at the same shape
(assets/measurements/h100-cudnn-l2-setaside.json), and the spread of the CTAs' sweeps.
Usage: kv_drift_merge.py OUTDIR [CUDNN_SETASIDE_JSON]   (writes OUTDIR/h100-kv-drift.json)"""
import json
import os
import sys

from merge_ncu import num, paired_launches, write_json

MB = 1e6


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def cudnn_curve(path):
    """cuDNN's d = 128, N = 64K, H = 4 causal forward: (set-aside bytes, DRAM read bytes) in run order."""
    if not os.path.exists(path):
        return []
    out = []
    for r in json.load(open(path))["sdpa"]:
        if r["backend"] == "cudnn" and r["N"] == 65536 and r["H"] == 4 and r["d"] == 128 and r["causal"]:
            out.append((r["l2_set_aside_bytes"], sum(k["dram__bytes_read.sum"] or 0 for k in r["ncu_kernels"])))
    return out


def beyond(rec, mib):
    """K/V re-read bytes at LRU reuse distances of at least `mib` MiB (bins of reuse_bin_mib)."""
    w = rec["reuse_bin_mib"]
    return sum(b for k, b in enumerate(rec["kv_reread_mb_by_reuse"]) if (k + 0.5) * w >= mib) * MB


def main():
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    cudnn_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "../../assets/measurements/h100-cudnn-l2-setaside.json")
    runs, rows = paired_launches(os.path.join(out, "kv-drift-ncu-runs.txt"), os.path.join(out, "kv-drift-ncu.csv"),
                                 "kv_sweep", "kv_drift_merge.py")
    plain = jsonl(os.path.join(out, "kv-drift.jsonl"))
    under_ncu = jsonl(os.path.join(out, "ncu", "kv-drift.jsonl"))
    if len(plain) != len(runs) or len(under_ncu) != len(runs):
        sys.exit(f"kv_drift_merge.py: {len(runs)} profiled sweeps, {len(plain)} plain records, {len(under_ncu)} under ncu")
    device = open(os.path.join(out, "kv-drift-runs.txt")).readline().split(":")[0].strip()
    sweeps = []
    for line, row, rec, rec_ncu in zip(runs, rows, plain, under_ncu):
        label = line[1]
        if rec["record"]["label"] != label or rec_ncu["record"]["label"] != label:
            sys.exit(f"kv_drift_merge.py: sweep {label} out of step with the records")
        sweeps.append({"label": label, "order": rec["order"], "work_level": rec["work_level"], "run": rec["run"],
                       "aside_bytes": rec["aside_bytes"], "work_mma_per_warp": rec["record"]["work"],
                       "dram_read_bytes": num(row["dram__bytes_read.sum"]),
                       "dram_write_bytes": num(row["dram__bytes_write.sum"]),
                       "ncu_time_us": num(row["gpu__time_duration.sum"]) / 1e3,
                       "event_us": rec["event_us"], "record": rec["record"], "record_under_ncu": rec_ncu["record"]})
    cud = cudnn_curve(cudnn_path)
    args = " ".join(f'{k}="{os.environ[k]}"' for k in ("KV_DRIFT_ARGS", "RAW_ARGS") if os.environ.get(k))
    doc = {"device": {"name": device},
           "shape": {"B": 1, "H": 4, "N": 65536, "d": 128, "causal": True, "Br": 128, "Bc": 128, "ctas": "one per SM"},
           "method": {"command": (args + " " if args else "") + "gpu/bench/kv_drift.sh OUTDIR",
                      "counters": "ncu --clock-control none --cache-control none -k regex:kv_sweep (the binary writes "
                                  "256 MiB before each sweep and reads the set-aside buffer through the persisting window)",
                      "records": "a plain pass (no ncu) of the same sweeps: %globaltimer when each tile's data is in "
                                 "(thread 0), the items each CTA took; the record under ncu is kept beside it",
                      "reuse": "LRU stack distance in bytes over K, V, Q and O tiles in timestamp order"},
           "cudnn_curve": [{"aside_bytes": a, "dram_read_bytes": d} for a, d in cud],
           "sweeps": sweeps}
    write_json(os.path.join(out, "h100-kv-drift.json"), doc)

    print(f"{device}: synthetic causal forward, d = 128, N = 64K, H = 4, 128 x 128 tiles, one CTA per SM")
    print("DRAM read MB (ncu) against the L2 set aside (MiB), each sweep after a 256 MiB write:")
    asides = sorted({(s["run"], s["aside_bytes"]) for s in sweeps})
    print(f"{'sweep':<40}" + "".join(f"{a / 2**20:>9.2f}" for _, a in asides) + "   us (0 MiB)")
    if cud:
        print(f"{'cuDNN forward (h100-cudnn-l2-setaside)':<40}" + "".join(f"{d / MB:>9.1f}" for _, d in cud))
    for label in dict.fromkeys(s["label"] for s in sweeps):
        mine = sorted((s for s in sweeps if s["label"] == label), key=lambda s: s["run"])
        print(f"{label:<40}" + "".join(f"{s['dram_read_bytes'] / MB:>9.1f}" for s in mine) + f"   {mine[0]['event_us']:.0f}")
    print()
    print("The spread (plain pass): tile time, each CTA's mean tile time, neighbouring rows' drift over their")
    print("shared tiles, and K/V re-reads at LRU reuse distances >= 18.75 / 25 / 31.25 MiB (all re-reads ~34 GB):")
    print(f"{'sweep':<40} {'MiB':>6} {'tile us p50':>11} {'CTA us min..max':>15} {'|drift| us p50/p90':>19} "
          f"{'tiles p50/p90':>13} {'>=18.75':>8} {'>=25':>7} {'>=31.25':>8} MB")
    for s in sweeps:
        r = s["record"]
        if s["run"] not in (0, 3):
            continue
        print(f"{s['label']:<40} {s['aside_bytes'] / 2**20:6.2f} {r['step_us_p10_p50_p90'][1]:11.3f} "
              f"{r['cta_us_per_tile_min_max'][0]:7.3f}..{r['cta_us_per_tile_min_max'][1]:.3f} "
              f"{r['pair_abs_drift_us_p50_p90_max'][0]:9.2f}/{r['pair_abs_drift_us_p50_p90_max'][1]:<9.2f} "
              f"{r['pair_abs_drift_tiles_p50_p90'][0]:6.2f}/{r['pair_abs_drift_tiles_p50_p90'][1]:<6.2f} "
              f"{beyond(r, 18.75) / MB:8.1f} {beyond(r, 25) / MB:7.1f} {beyond(r, 31.25) / MB:8.1f}")
    print(f"wrote {os.path.join(out, 'h100-kv-drift.json')}")


if __name__ == "__main__":
    main()
