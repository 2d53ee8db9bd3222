#!/usr/bin/env python3
"""Merge gpu/bench/l2_partition.sh's outputs (OUTDIR/sides.txt, runs.txt, ncu/*.csv) into
OUTDIR/l2-partition.json and print the tables. Usage: l2_partition_merge.py OUTDIR [DEVICE_NAME]

Per footprint F read PASSES times: hit = 1 - (DRAM read - F) / ((PASSES - 1) F), the share of the
later passes' bytes the L2 served; near_hit = the sectors that hit where the SM's request first
looked them up (srcunit tex), over the same bytes; fabric = sectors that crossed between the two
partitions (srcunit ltcfabric), per byte read."""
import os
import sys

from merge_ncu import num, read_rows, write_json

MODES = ["all", "cross", "side0", "side1", "random"]


def metric(row, name):
    return num(row[name]) if name in row else None


def sweep(out):
    runs = [l.split() for l in open(os.path.join(out, "runs.txt")) if l.startswith("run ")]
    records = []
    for mode in MODES:
        path = os.path.join(out, "ncu", mode + ".csv")
        mine = [r for r in runs if r[2] == mode]
        if not mine or not os.path.exists(path):
            continue
        rows = [r for r in read_rows(path) if "pass_kernel" in r.get("Kernel Name", "")]
        if len(rows) != len(mine):
            sys.exit(f"l2_partition_merge: {path}: {len(rows)} launches profiled, {len(mine)} run")
        for run, row in zip(mine, rows):
            kv = {run[i]: run[i + 1] for i in range(1, len(run) - 1, 2)}
            passes, footprint = int(kv["passes"]), float(kv["footprint_bytes"])
            rec = {"mode": mode, "passes": passes, "readers": int(kv["readers"]), "footprint_bytes": footprint,
                   "dram_read_bytes": metric(row, "dram__bytes_read.sum"),
                   "l2_sm_read_bytes": 32 * metric(row, "lts__t_sectors_srcunit_tex_op_read.sum"),
                   "time_s": metric(row, "gpu__time_duration.sum") * 1e-9}
            warm = (passes - 1) * footprint
            rec["hit"] = 1 - max(0.0, rec["dram_read_bytes"] - footprint) / warm
            hit = metric(row, "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")
            if hit is not None:
                rec["near_hit_bytes"] = 32 * hit
                rec["near_hit"] = 32 * hit / warm
            fabric = metric(row, "lts__t_sectors_srcunit_ltcfabric.sum")
            if fabric is not None:
                rec["fabric_bytes"] = 32 * fabric
                rec["fabric_per_byte"] = 32 * fabric / (passes * footprint)
            for part in ("lookup_hit", "lookup_miss"):
                x = metric(row, f"lts__t_sectors_srcunit_ltcfabric_{part}.sum")
                if x is not None:
                    rec[f"fabric_{part}_bytes"] = 32 * x
            rec["ncu"] = {k: num(v) for k, v in row.items() if k.startswith(("dram__", "lts__", "gpu__"))}
            records.append(rec)
    return records


def kernels(out):
    found = {}
    for name in ("sdpa", "flash2"):
        path = os.path.join(out, "ncu", name + ".csv")
        if not os.path.exists(path):
            continue
        rows = read_rows(path)
        if not rows:
            continue
        row = rows[-1]
        found[name] = {"kernel": row.get("Kernel Name", "")[:120],
                       **{k: num(v) for k, v in row.items() if k.startswith(("dram__", "lts__", "gpu__"))}}
    return found


def main():
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else ""
    sides = [l.split() for l in open(os.path.join(out, "sides.txt")) if l.strip()]
    sm_side = {int(s): int(side) for s, side, *_ in sides}
    lat = {int(s): (float(a), float(b)) for s, _, a, b in sides}
    records = sweep(out)
    doc = {"device": {"name": device}, "command": "gpu/bench/l2_partition.sh OUTDIR",
           "method": __doc__.split("\n\n")[1].replace("\n", " "),
           "sides": {str(s): sm_side[s] for s in sorted(sm_side)},
           "first_read_cycles": {str(s): lat[s][0] for s in sorted(lat)},
           "second_read_cycles": {str(s): lat[s][1] for s in sorted(lat)},
           "runs": records, "kernels": kernels(out)}
    write_json(os.path.join(out, "l2-partition.json"), doc)
    for side in (0, 1):
        sms = [s for s in sorted(sm_side) if sm_side[s] == side]
        first = sum(lat[s][0] for s in sms) / max(1, len(sms))
        second = sum(lat[s][1] for s in sms) / max(1, len(sms))
        print(f"side {side}: {len(sms)} SMs, first read {first:.0f} cycles, second {second:.0f}: "
              + " ".join(map(str, sms)))
    print(f"{'mode':>7} {'F MB':>6} {'hit':>7} {'near hit':>8} {'fabric/B':>8} {'GB/s':>6}")
    for r in records:
        near = f"{100 * r['near_hit']:7.1f}%" if "near_hit" in r else "       -"
        fab = f"{r['fabric_per_byte']:8.3f}" if "fabric_per_byte" in r else "       -"
        gbs = r["passes"] * r["footprint_bytes"] / r["time_s"] / 1e9
        print(f"{r['mode']:>7} {r['footprint_bytes'] / 1e6:6.1f} {100 * r['hit']:6.1f}% {near} {fab} {gbs:6.0f}")
    for name, k in doc["kernels"].items():
        print(name, k)


if __name__ == "__main__":
    main()
