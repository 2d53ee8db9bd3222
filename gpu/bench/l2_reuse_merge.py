#!/usr/bin/env python3
"""Merge l2_reuse runs (runs.txt) with their Nsight Compute counters (one CSV per run) into one
record file, with the surviving fraction of the re-read bytes at each reuse distance, and print
the table. Usage: l2_reuse_merge.py RUNS.txt NCU_DIR OUT.json [DEVICE_NAME]"""
import os
import sys

from merge_ncu import num, read_rows, write_json


def ncu_values(path):
    row = read_rows(path)[-1]  # the last row: the reuse_kernel launch
    return {"dram_read_bytes": num(row["dram__bytes_read.sum"]),
            "l2_sm_read_bytes": 32 * num(row["lts__t_sectors_srcunit_tex_op_read.sum"]),
            **({"dram_write_bytes": num(row["dram__bytes_write.sum"])} if "dram__bytes_write.sum" in row else {}),
            "time_s": num(row["gpu__time_duration.sum"]) * 1e-9}


def record(line, ncu_dir):
    name, pattern, *kv = line.split()
    fields = {kv[i]: int(kv[i + 1]) for i in range(0, len(kv), 2)}
    rec = {"name": name, "pattern": pattern, **fields, **ncu_values(os.path.join(ncu_dir, name + ".csv"))}
    missed = max(0.0, rec["dram_read_bytes"] - rec["new_bytes"])
    rec["survived"] = 1.0 - missed / rec["reread_bytes"]
    return rec


def main():
    runs, ncu_dir, out = sys.argv[1:4]
    device = sys.argv[4] if len(sys.argv) > 4 else ""
    records = [record(l, ncu_dir) for l in open(runs) if l.strip()]
    doc = {"device": {"name": device}, "command": "gpu/bench/l2_reuse.sh OUTDIR", "method": "gpu/bench/l2_reuse.cu under ncu --clock-control none --cache-control all; "
                     "survived = 1 - (dram_read_bytes - new_bytes) / reread_bytes; distance_bytes = "
                     "(1 + reuses) * lag * ctas * chunk, the LRU reuse distance between two touches",
           "runs": records}
    write_json(out, doc)
    print(f"{'pattern':>10} {'distance MB':>11} {'DRAM read MB':>12} {'re-read MB':>10} {'survived':>8}")
    for r in records:
        print(f"{r['pattern']:>10} {r['distance_bytes'] / 1e6:11.1f} {r['dram_read_bytes'] / 1e6:12.1f} "
              f"{r['reread_bytes'] / 1e6:10.1f} {100 * r['survived']:7.1f}%")


if __name__ == "__main__":
    main()
