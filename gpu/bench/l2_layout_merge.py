#!/usr/bin/env python3
"""Merge l2_layout runs (the program's stdout) with their Nsight Compute counters into one record
file and print, per layout (rows) and working-set size (columns), the share of re-read bytes that
survived in the L2 (100 % = the working set fits). Usage: l2_layout_merge.py RUNS.txt NCU.csv OUT.json [DEVICE_NAME]"""
import os
import sys

from merge_ncu import num, paired_launches, write_json


def label(region, stride):
    def size(b):
        return f"{b >> 20} MiB" if b % (1 << 20) == 0 else f"{b >> 10} KiB"
    return "contiguous" if region == stride else f"{size(region)} every {size(stride)}"


def main():
    runs_path, ncu_path, out = sys.argv[1:4]
    device = sys.argv[4] if len(sys.argv) > 4 else ""
    runs, rows = paired_launches(runs_path, ncu_path, "layout_kernel", "l2_layout_merge")
    baseline = num(rows[0]["dram__bytes_read.sum"])  # the launch of no regions
    records = []
    for run, row in zip(runs[1:], rows[1:]):
        region, stride, regions, rounds = int(run[2]), int(run[4]), int(run[6]), int(run[8])
        size = region * regions
        dram = num(row["dram__bytes_read.sum"]) - baseline
        records.append({"region_bytes": region, "stride_bytes": stride, "regions": regions, "rounds": rounds,
                        "working_set_bytes": size, "dram_read_bytes": dram,
                        "l2_sm_read_bytes": 32 * num(row["lts__t_sectors_srcunit_tex_op_read.sum"]),
                        "time_s": num(row["gpu__time_duration.sum"]) * 1e-9,
                        "survived": 1.0 - max(0.0, dram - size) / (size * (rounds - 1))})
    options = " ".join(f'{k}="{os.environ[k]}"' for k in ("LAYOUTS", "FRACTIONS") if k in os.environ)
    doc = {"device": {"name": device}, "command": (options + " " if options else "") + "gpu/bench/l2_layout.sh OUTDIR",
           "method": "gpu/bench/l2_layout.cu: all SMs read `regions` regions of `region_bytes`, `stride_bytes` "
                     "apart, `rounds` times in the same order; ncu --clock-control none --cache-control all; "
                     "dram_read_bytes less those of a launch of no regions (baseline_bytes); survived = "
                     "1 - (dram_read_bytes - working_set_bytes) / (working_set_bytes * (rounds - 1))",
           "baseline_bytes": baseline, "runs": records}
    write_json(out, doc)
    sizes = sorted({r["working_set_bytes"] for r in records})
    print("re-read bytes that survived in the L2, by layout (rows) and working set (columns, MiB)")
    print(f"{'layout':>22}" + "".join(f"{s / (1 << 20):8.0f}" for s in sizes))
    layouts = []
    for r in records:
        if (r["region_bytes"], r["stride_bytes"]) not in layouts:
            layouts.append((r["region_bytes"], r["stride_bytes"]))
    for region, stride in layouts:
        by = {r["working_set_bytes"]: r["survived"] for r in records
              if (r["region_bytes"], r["stride_bytes"]) == (region, stride)}
        print(f"{label(region, stride):>22}" + "".join(f"{100 * by[s]:7.1f}%" if s in by else f"{'-':>8}" for s in sizes))


if __name__ == "__main__":
    main()
