#!/usr/bin/env python3
"""Does the timing engine rank block shapes as the GPU did? For every recorded problem measured with
several block shapes (hbmlab measure --blocks all), compare the engine's fastest shape with the
measured fastest; a problem counts as ranked right when the engine's pick ran within 3 % of the
measured best.
Run: python3 tests/bench/rank_blocks.py [--hbmlab build/hbmlab] [--list] assets/measurements/h100.json ..."""
import argparse
import re
import subprocess
import sys
from collections import defaultdict

# A record row of `hbmlab validate`: source, GPU, B, H, N, d, mask, Br×Bc, K/V order, DRAM
# measured, predicted, error, time measured, predicted, error.
ROW = re.compile(r"^\s+(\S+(?: \S+)*?)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(full|causal|\S+)\s+(\d+×\d+)\s*"
                 r"(asc|desc)?\s+.*?(\d+\.\d+)\s+(\d+\.\d+)\s+[+-]\d+\.\d+%\s*$")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hbmlab", default="build/hbmlab")
    ap.add_argument("--list", action="store_true", help="print every problem, ranked right or missed")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    hits = total = 0
    for path in args.files:
        out = subprocess.run([args.hbmlab, "validate", "--measurements", path], capture_output=True)
        if out.returncode != 0:
            sys.exit(f"rank_blocks: {path}: {out.stderr.decode(errors='replace').strip()}")
        problems = defaultdict(list)
        for line in out.stdout.decode(errors="replace").splitlines():
            m = ROW.match(line)
            if m:
                src, gpu, B, H, N, d, mask, blocks, order, t_meas, t_pred = m.groups()
                problems[(src, gpu, B, H, N, d, mask, order)].append((blocks, float(t_meas), float(t_pred)))
        file_hits = file_total = 0
        for key, rows in sorted(problems.items()):
            if len({b for b, _, _ in rows}) < 2:
                continue
            measured = min(rows, key=lambda r: r[1])
            engine = min(rows, key=lambda r: r[2])
            ok = engine[1] <= 1.03 * measured[1]
            file_hits += ok
            file_total += 1
            if args.list:
                src, gpu, B, H, N, d, mask, order = key
                print(f"{'ok  ' if ok else 'MISS'} {src} B={B} H={H} N={N} d={d} {mask} {order or ''}: measured fastest "
                      f"{measured[0]}, the engine's {engine[0]} ({engine[1] / measured[1] - 1:+.1%})")
        print(f"{path}: {file_hits} of {file_total} problems ranked right")
        hits += file_hits
        total += file_total
    print(f"{hits} of {total} problems: the engine's fastest block shape is the measured fastest or within 3 %")


if __name__ == "__main__":
    main()
