# Writes ncu's DRAM and L2 figures into a measurement file's records (rewrites it whole).
# Rows between hbmlab_marker launches with grid k+1 (block 32: begin, block 64: end) are record k.
# Run: python3 gpu/bench/merge_counters.py MEASUREMENT.json NCU.csv
import json
import sys

from merge_ncu import num, read_rows, write_json


def main(path, csv_path):
    data = json.load(open(path))
    rows = read_rows(csv_path)
    sums, kernels, current = {}, {}, None
    for r in rows:
        name = r.get("Kernel Name", "")
        if "hbmlab_marker" in name:
            k = int(num(r["launch__grid_size"])) - 1
            current = k if num(r["launch__block_size"]) == 32 else None
            continue
        if current is None:
            continue
        s = sums.setdefault(current, {"dram_read": 0, "dram_write": 0, "l2_read": 0, "l2_write": 0, "ns": 0})
        s["dram_read"] += num(r["dram__bytes_read.sum"]) or 0
        s["dram_write"] += num(r["dram__bytes_write.sum"]) or 0
        s["l2_read"] += (num(r["lts__t_sectors_srcunit_tex_op_read.sum"]) or 0) * 32
        s["l2_write"] += (num(r["lts__t_sectors_srcunit_tex_op_write.sum"]) or 0) * 32
        s["ns"] += num(r["gpu__time_duration.sum"]) or 0
        kernels.setdefault(current, []).append({
            "name": name.split("(")[0].split("<")[0].split("::")[-1], "grid": r.get("Grid Size"),
            "block": r.get("Block Size"), "smem_dynamic": num(r.get("launch__shared_mem_per_block_dynamic")),
            "registers": num(r.get("launch__registers_per_thread")),
            "dram_read_bytes": num(r["dram__bytes_read.sum"]), "dram_write_bytes": num(r["dram__bytes_write.sum"]),
            "duration_ns": num(r["gpu__time_duration.sum"])})
    filled = 0
    for k, rec in enumerate(data["records"]):
        if k in sums:
            s = sums[k]
            rec["dram_read_bytes"] = int(s["dram_read"])
            rec["dram_write_bytes"] = int(s["dram_write"])
            rec["l2_sm_read_bytes"] = int(s["l2_read"])
            rec["l2_sm_write_bytes"] = int(s["l2_write"])
            rec["ncu_time_ms"] = s["ns"] / 1e6
            rec["ncu_kernels"] = kernels[k]
            filled += 1
    data["method"]["counters"] = ("ncu (gpu/bench/measure_counters.sh): --clock-control none --cache-control all, "
                                  "one profiled launch per record; dram__bytes_read/write.sum, "
                                  "lts__t_sectors_srcunit_tex_op_read/write.sum x 32 bytes; summed over the "
                                  "record's kernels")
    write_json(path, data)
    print(f"merge_counters: {filled}/{len(data['records'])} records have counters")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
