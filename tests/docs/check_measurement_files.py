#!/usr/bin/env python3
"""Checks that assets/measurements/README.md's table of files and the folder agree.

Every file the table's first column names must exist, and every file in assets/measurements/ (but
the README itself) must be named there. The column names files in the page's shorthand: after a
whole name, `.log` or `-ncu.csv` stand for the same name with that ending (`calibration-h100.json`,
`-ncu.csv`, `.log` are calibration-h100.json, calibration-h100-ncu.csv and calibration-h100.log; a
`-` ending replaces an `-ncu` the whole name ends in, so `h100-onchip-ncu.csv`, `-named-ncu.csv` is
h100-onchip-named-ncu.csv), and `*` is a wildcard (`h200-l2-reuse.*`, `h100-cta-schedule/*.json`).

  check_measurement_files.py [ROOT]     exit 0 when they agree; otherwise one line per difference, exit 1
"""
from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

ENDINGS = (".tar.xz", ".json", ".csv", ".log", ".txt", ".md", ".*")


def stem(name: str) -> str:
    """The name without its ending (`h100-kv-drift-raw.tar.xz` -> `h100-kv-drift-raw`)."""
    for ending in ENDINGS:
        if name.endswith(ending):
            return name[: -len(ending)]
    return name


def named_files(page: str) -> list[tuple[int, str]]:
    """(line, pattern) for every file the table's first column names, shorthand expanded."""
    names: list[tuple[int, str]] = []
    in_table = False
    for number, line in enumerate(page.split("\n"), start=1):
        if line.startswith("| file |"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        if line.startswith("|---"):
            continue
        first = line.split("|")[1]
        base = None
        for token in re.findall(r"`([^`]+)`", first):
            if token.startswith((".", "-")):
                if base is None:
                    raise SystemExit(f"assets/measurements/README.md:{number}: `{token}` follows no whole name")
                prefix = re.sub(r"-ncu$", "", base) if token.startswith("-") else base
                names.append((number, prefix + token))
            else:
                base = stem(token)
                names.append((number, token))
    return names


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    folder = root / "assets" / "measurements"
    page = (folder / "README.md").read_text(encoding="utf-8")
    names = named_files(page)
    if not names:
        print("assets/measurements/README.md: no table of files (a row starting `| file |`)")
        return 1
    present = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != "README.md")
    problems = []
    for line, pattern in names:
        if not any(fnmatch.fnmatchcase(f, pattern) for f in present):
            problems.append(f"assets/measurements/README.md:{line}: `{pattern}` is named but not in the folder")
    for f in present:
        if not any(fnmatch.fnmatchcase(f, pattern) for _, pattern in names):
            problems.append(f"assets/measurements/{f}: in the folder but not named in the README's table of files")
    for p in problems:
        print(p)
    print(f"{len(names)} names in the table, {len(present)} files in the folder: "
          + ("they agree" if not problems else f"differences: {len(problems)}"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
