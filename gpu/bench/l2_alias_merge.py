#!/usr/bin/env python3
"""Merge l2_alias runs (the program's stdout) with their Nsight Compute counters into one record
file and print, per stride and line count, the share of re-reads that missed the L2 (DRAM reads
less those of the first launch, which reads no lines). Usage: l2_alias_merge.py RUNS.txt NCU.csv OUT.json [DEVICE_NAME]"""
import sys

from merge_ncu import num, paired_launches, write_json

FILL_BYTES = 64  # what DRAM delivers for one 16-byte read of a cold line (measured: 2 sectors)


def main():
    runs_path, ncu_path, out = sys.argv[1:4]
    device = sys.argv[4] if len(sys.argv) > 4 else ""
    runs, rows = paired_launches(runs_path, ncu_path, "alias_kernel", "l2_alias_merge")
    records = []
    baseline = num(rows[0]["dram__bytes_read.sum"])  # the launch of no lines
    for run, row in zip(runs[1:], rows[1:]):
        stride, lines, rounds = int(run[2]), int(run[4]), int(run[6])
        dram = num(row["dram__bytes_read.sum"]) - baseline
        rereads = lines * FILL_BYTES * (rounds - 1)
        records.append({"stride_bytes": stride, "lines": lines, "rounds": rounds, "dram_read_bytes": dram,
                        "l2_sm_read_bytes": 32 * num(row["lts__t_sectors_srcunit_tex_op_read.sum"]),
                        "rereads_missed": max(0.0, dram - lines * FILL_BYTES) / rereads})
    doc = {"device": {"name": device}, "command": "gpu/bench/l2_alias.sh OUTDIR",
           "method": "gpu/bench/l2_alias.cu: one CTA reads `lines` lines `stride_bytes` apart `rounds` times; "
                     "ncu --clock-control none --cache-control all; dram_read_bytes less those of a launch "
                     f"of no lines (baseline_bytes); rereads_missed = (dram_read_bytes - lines * {FILL_BYTES}) / "
                     f"(lines * {FILL_BYTES} * (rounds - 1))",
           "baseline_bytes": baseline, "runs": records}
    write_json(out, doc)
    counts = sorted({r["lines"] for r in records})
    print("re-reads that missed the L2, by stride (rows) and lines (columns); 0 % = they fit, 100 % = every round missed")
    print(f"{'stride':>14}" + "".join(f"{c:>8d}" for c in counts))
    for stride in sorted({r["stride_bytes"] for r in records}):
        by = {r["lines"]: r["rereads_missed"] for r in records if r["stride_bytes"] == stride}
        cells = "".join(f"{100 * by[c]:7.1f}%" if c in by else f"{'-':>8}" for c in counts)
        print(f"{stride:>14d}" + cells)


if __name__ == "__main__":
    main()
