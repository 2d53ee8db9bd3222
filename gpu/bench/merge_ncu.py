# Joins an `ncu --csv --page raw` log of calibrate_h100.py --ncu-pass to the timing JSON: the rows
# after marker kernel hbmlab_marker with grid size k+1 belong to SDPA shape k.
# Run: python3 gpu/bench/merge_ncu.py timing.json ncu.csv out.json
# The other scripts of gpu/bench take from here what they share: ncu's CSV (read_rows, num), the marker
# kernel and its rows (shape_marker, kernels_by_marker), the --ncu-pass / --merge command line, write_json.
import argparse
import csv
import io
import json
import os
import sys

METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
           "lts__t_sectors_srcunit_tex_op_write.sum", "gpu__time_duration.sum", "launch__grid_size",
           "launch__block_size", "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static",
           "launch__registers_per_thread", "launch__waves_per_multiprocessor",
           "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_registers"]


def read_rows(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]  # drops the units row


def paired_launches(runs_path, ncu_path, kernel, tool):
    """A microbenchmark's launches: its `run ...` stdout lines, split, and the ncu rows of `kernel`,
    one per line; exits naming `tool` and the CSV if the two counts differ."""
    runs = [l.split() for l in open(runs_path) if l.startswith("run ")]
    rows = [r for r in read_rows(ncu_path) if kernel in r.get("Kernel Name", "")]
    if len(rows) != len(runs):
        sys.exit(f"{tool}: {ncu_path}: {len(rows)} launches profiled, {len(runs)} run")
    return runs, rows


def write_json(path, doc):
    """Writes doc to path whole or not at all (a temporary file renamed over it)."""
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def num(x):
    try:
        return float(x.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def shape_marker():
    """mark(k): launches the marker kernel hbmlab_marker (through cupy) with grid size k + 1, so that
    kernels_by_marker gives every kernel after it, up to the next marker, to shape k."""
    import cupy as cp
    import numpy as np
    kernel = cp.RawKernel(r'''extern "C" __global__ void hbmlab_marker(int* p) { if (p) p[0] = 1; }''', "hbmlab_marker")
    return lambda k: kernel((k + 1,), (32,), (np.int64(0),))


def profiled_launch(fn, mark=None, k=0):
    """fn once unprofiled (a warm-up: cuDNN builds its plan, the caches fill), then once inside the NVTX
    range "sdpa" that the scripts' `ncu --nvtx --nvtx-include` profiles, after mark(k) (shape_marker)
    when a marker is given."""
    import torch
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("sdpa")
    if mark is not None:
        mark(k)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def ncu_pass_or_merge(usage, ncu_pass, merge, options=None):
    """The command line of a script that profiles its shapes under ncu, then joins ncu's CSV to them:
    --ncu-pass runs ncu_pass(), --merge NCU_CSV OUT_JSON runs merge(args) (args.merge: the two paths);
    with neither, it exits with `usage`. options(parser) adds the script's own options."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu-pass", action="store_true")
    ap.add_argument("--merge", nargs=2, metavar=("NCU_CSV", "OUT_JSON"))
    if options:
        options(ap)
    args = ap.parse_args()
    if args.ncu_pass:
        ncu_pass()
    elif args.merge:
        merge(args)
    else:
        sys.exit(usage)


def kernels_by_marker(ncu_path, count, metrics=METRICS):
    """The profiled kernels of shapes 0..count-1, each with its `metrics` (METRICS unless given): every
    row after the marker kernel hbmlab_marker with grid size k+1 (up to the next marker) belongs to shape k."""
    kernels = {k: [] for k in range(count)}
    current = None
    for r in read_rows(ncu_path):
        name = r.get("Kernel Name", "")
        if "hbmlab_marker" in name:
            g = num(r.get("launch__grid_size", ""))
            current = int(g) - 1 if g else None
            continue
        if current is None or current not in kernels:
            continue
        k = {"kernel": name, "grid": r.get("Grid Size"), "block": r.get("Block Size")}
        for m in metrics:
            k[m] = num(r.get(m, ""))
        kernels[current].append(k)
    return kernels


def main(timing_path, ncu_path, out_path):
    timing = json.load(open(timing_path))
    shapes = timing.get("sdpa_shapes", [])
    kernels = kernels_by_marker(ncu_path, len(shapes))
    for row in timing.get("sdpa", []):
        idx = shapes.index({key: row[key] for key in ("backend", "B", "H", "N", "d", "causal", "dtype")})
        ks = kernels.get(idx, [])
        row["ncu_kernels"] = ks
        if ks:
            row["ncu_total"] = {m: sum((k[m] or 0) for k in ks) for m in METRICS[:5]}
            row["ncu_total"]["l2_sm_read_bytes"] = row["ncu_total"]["lts__t_sectors_srcunit_tex_op_read.sum"] * 32
            row["ncu_total"]["l2_sm_write_bytes"] = row["ncu_total"]["lts__t_sectors_srcunit_tex_op_write.sum"] * 32
    timing["method"]["counters"] = ("ncu --clock-control none --cache-control all (L2 flushed before each "
                                    "profiled kernel), one profiled launch per shape after an unprofiled warm-up")
    timing["method"]["ncu_csv"] = os.path.basename(ncu_path)
    write_json(out_path, timing)
    n_with = sum(1 for r in timing.get("sdpa", []) if r.get("ncu_kernels"))
    print(f"merged: {n_with}/{len(timing.get('sdpa', []))} SDPA shapes have ncu rows")


if __name__ == "__main__":
    main(*sys.argv[1:4])
