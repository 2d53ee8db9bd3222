# Cross-check of in-process CUPTI counters against Nsight Compute on the same sweep: two
# measurement files whose records line up (same hbmlab measure arguments), one from
# `hbmlab measure` (CUPTI Range Profiler), one with ncu's figures merged in (measure_counters.sh).
# Run: python3 gpu/bench/xcheck_counters.py cupti.json ncu.json
import json
import sys

FIELDS = ["dram_read_bytes", "dram_write_bytes", "l2_sm_read_bytes", "l2_sm_write_bytes"]


def main(a_path, b_path):
    a = json.load(open(a_path))["records"]
    b = json.load(open(b_path))["records"]
    print("| kernel | d | N | causal | Br×Bc | " + " | ".join(f"{f} CUPTI / ncu" for f in FIELDS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(FIELDS))
    worst = 0.0
    for ra, rb in zip(a, b):
        p = ra["problem"]
        cells = []
        for f in FIELDS:
            x, y = ra.get(f), rb.get(f)
            if x is None or y is None:
                cells.append("–")
                continue
            rel = abs(x - y) / max(y, 1)
            worst = max(worst, rel)
            cells.append(f"{x / 1e6:.1f} / {y / 1e6:.1f} MB ({100 * rel:.1f} %)")
        print(f"| {ra['kernel']} | {p['head_dim']} | {p['seq_len']} | {'yes' if p['causal'] else 'no'} | "
              f"{ra['blocks']['Br']}×{ra['blocks']['Bc']} | " + " | ".join(cells) + " |")
    print(f"\nworst relative difference: {100 * worst:.1f} %")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
