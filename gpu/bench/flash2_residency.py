"""flash2_residency.sh's table: cycles a step of hbmlab's flash2 forward with one and with two CTAs an
SM, measured (ncu), predicted by the engine (`hbmlab simulate --gpu h200 --hbmlab-kernels`, the same
difference of two runs) and by the issue-order model of the kernel's SASS (sass_issue.py), with the
warps' states per issued instruction beside them; also writes OUTDIR/flash2-residency-ncu.csv.
Run: python3 gpu/bench/flash2_residency.py OUTDIR HBMLAB"""
from __future__ import annotations

import csv
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_issue  # noqa: E402

STATES = ("wait", "selected", "not_selected", "short_scoreboard", "long_scoreboard", "math_pipe_throttle",
          "mio_throttle", "dispatch_stall", "barrier", "no_instruction")


def number(x: str) -> float | None:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return None


def measured(out: str):
    """{(ctas, d, br, bc): {n: row}} from the raw ncu logs: each record's own launch (after its check)."""
    runs: dict = {}
    for path in sorted(glob.glob(os.path.join(out, "raw", "*.csv"))):
        tag, d, heads, n, causal = re.search(r"(one|two)-d(\d+)-h(\d+)-n(\d+)(-causal)?\.csv$", path).groups()
        rows = [r for r in csv.reader(open(path)) if len(r) > 20]
        if not rows:
            continue
        head = rows[0]
        records = [dict(zip(head, r)) for r in rows[2:]][1::2]
        for r in records:
            m = re.search(r"flash2_kernel<__half, (\d+), (\d+), (\d+)", r["Kernel Name"])
            key = (bool(causal), 1 if tag == "one" else 2, int(m.group(1)), int(m.group(2)), int(m.group(3)))
            st = {s: number(r.get(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio", "") or "")
                  for s in STATES}
            runs.setdefault(key, {})[int(n)] = dict(heads=int(heads), cycles=number(r["sm__cycles_elapsed.max"]),
                                                    grid=number(r["launch__grid_size"]),
                                                    ctas=number(r["sm__ctas_launched.max"]),
                                                    instructions=number(r["smsp__inst_executed.sum"]), states=st)
    return runs


def engine_run(hbmlab: str, heads: int, n: int, d: int, br: int, bc: int, causal: bool) -> tuple[float, float]:
    """The engine's predicted seconds and the clock (Hz) it ran the kernel's pipes at."""
    args = [hbmlab, "simulate", "--algo", "flash2", "--gpu", "h200", "--batch", "1", "--heads", str(heads),
            "--seq-len", str(n), "--head-dim", str(d), "--block-rows", str(br), "--block-cols", str(bc),
            "--hbmlab-kernels", "--numerics", "off", "--json"] + (["--causal"] if causal else [])
    result = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    return result["time"]["predicted_s"], result["on_chip"]["pipes"]["clock_mhz"] * 1e6


def main(out: str, hbmlab: str) -> int:
    runs = measured(out)
    functions = sass_issue.read_functions(os.path.join(out, "flash2-sass.txt.gz"))
    print("# hbmlab's flash2 forward, fp16, B = 1: SM cycles a step with exactly one and exactly two")
    print("# CTAs on every SM (ncu's sm__ctas_launched.max), by the difference of two runs of the same grid")
    print("# (N and 2N at half the heads): measured, the engine's (hbmlab simulate --gpu h200 --hbmlab-kernels, the")
    print("# same difference, at the clock it runs the pipes at) and the issue-order model of the kernel's SASS")
    print("# (sass_issue.py, the CTAs starting together); then the warps' states, cycles per issued instruction")
    print("# (ncu smsp__average_warps_issue_stalled_*_per_issue_active, the longer run)")
    print(f"{'mask':>6} {'d':>4} {'Br×Bc':>8} {'CTAs/SM':>7} {'measured':>9} {'engine':>8} {'err':>7} {'SASS model':>10} {'err':>7}")
    table = []
    for key in sorted(runs):
        causal, ctas, d, br, bc = key
        by_n = runs[key]
        if len(by_n) != 2:
            continue
        (n1, a), (n2, b) = sorted(by_n.items())
        if a["ctas"] != ctas or b["ctas"] != ctas:
            print(f"# {key}: {a['ctas']} and {b['ctas']} CTAs on the busiest SM, not {ctas}: left out")
            continue
        steps = (n2 - n1) / bc
        meas = (b["cycles"] - a["cycles"]) / steps
        (long_s, clock_hz), (short_s, _) = (engine_run(hbmlab, b["heads"], n2, d, br, bc, causal),
                                            engine_run(hbmlab, a["heads"], n1, d, br, bc, causal))
        eng = (long_s - short_s) * clock_hz / steps
        name = next(k for k in functions if f"Li{d}ELi{br}ELi{bc}ELb{int(causal)}ELb0E" in k)
        model, _ = sass_issue.simulate(sass_issue.loop_body(sass_issue.parse(functions[name])), ctas)
        table.append((key, meas, eng, model, b))
        print(f"{'causal' if causal else 'full':>6} {d:>4} {f'{br}×{bc}':>8} {ctas:>7} {meas:>9,.0f} {eng:>8,.0f} {(eng / meas - 1) * 100:>+6.1f}% "
              f"{model:>10,.0f} {(model / meas - 1) * 100:>+6.1f}%")
    print()
    print(f"{'mask':>6} {'d':>4} {'Br×Bc':>8} {'CTAs/SM':>7} " + " ".join(f"{s[:13]:>13}" for s in STATES))
    for (causal, ctas, d, br, bc), _, _, _, b in table:
        print(f"{'causal' if causal else 'full':>6} {d:>4} {f'{br}×{bc}':>8} {ctas:>7} " +
              " ".join(f"{(b['states'][s] or 0):>13.2f}" for s in STATES))
    with open(os.path.join(out, "flash2-residency-ncu.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["causal", "d", "block_rows", "block_cols", "ctas_per_sm", "heads", "seq_len", "grid",
                    "sm_cycles_elapsed_max", "warp_instructions"] + [f"stalled_{s}_per_issue" for s in STATES])
        for (causal, ctas, d, br, bc), by_n in sorted(runs.items()):
            for n, r in sorted(by_n.items()):
                w.writerow([int(causal), d, br, bc, ctas, r["heads"], n, int(r["grid"]), int(r["cycles"]),
                            int(r["instructions"])] +
                           [r["states"][s] for s in STATES])
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
