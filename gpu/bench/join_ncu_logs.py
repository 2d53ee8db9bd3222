"""Joins `ncu --csv --page raw` logs (--log-file) into one table: every counter of every kernel row
(OUT_RAW), and the columns whose names match KEEP (OUT_KEPT); the first log's row of units heads both.
A log that is missing (its run failed) is left out. Used by fwd_stall_ncu.sh and standard_ncu.sh.
Run: python3 gpu/bench/join_ncu_logs.py NAME OUT_RAW OUT_KEPT KEEP LOG...   (NAME: the caller, for its line)"""
import csv
import re
import sys


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__.strip().splitlines()[-1])
    name, out_raw, out_kept, keep = argv[0], argv[1], argv[2], re.compile(argv[3])
    header, rows = [], []
    for log in argv[4:]:
        try:
            lines = [l for l in open(log) if l.strip() and not l.startswith("==")]
        except OSError:
            continue
        for r in csv.DictReader(lines):
            if r.get("ID") or not rows:  # one row of units (the first log's), then the kernels
                header += [h for h in r if h not in header]
                rows.append(r)
    for path, cols in ((out_raw, header), (out_kept, [h for h in header if keep.match(h)])):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    print(f"{name}: {len(rows) - 1} kernels, {len(header)} columns")


if __name__ == "__main__":
    main(sys.argv[1:])
