#!/usr/bin/env python3
"""Checks that the examples in hbmlab's Markdown files print what they show.

A checked example is a fenced code block whose lines start with `$ COMMAND`: each command is run
from the repository root (with the directory of the hbmlab binary and its tests/bench first on
PATH, so examples are typed as `hbmlab ...` and `bench_decode`), and its output (stdout and stderr together) must equal the lines that
follow it, up to the next `$ ` line or the end of the block. Two marks, explained in README.md
("Examples that cannot drift"), make room for what a page should not or cannot show:

  [… 82 lines]   a whole line: exactly 82 lines of the real output are left out here
  ~0.03          a figure that changes from run to run (wall-clock time): any number matches

A command that exits with a status other than 0 shows it as its block's last line: `[exit 2]`.
A block whose first line is `# needs a GPU` runs only with --gpu (a CUDA build on a machine with a
GPU); without it such blocks are skipped, and when nothing else is left the script exits 77.
Trailing spaces and trailing empty lines are ignored. Each distinct command runs once.

  check_examples.py --hbmlab build/hbmlab README.md ...       check; on a drift, name file:line
  check_examples.py --hbmlab build/hbmlab --update README.md  rewrite the shown outputs (maintainers)
  check_examples.py --hbmlab build/hbmlab --synopsis README.md
                    every option of every subcommand's --help appears in the README's synopsis
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = 77
ELISION = re.compile(r"^\[… (\d+) lines?\]$")
EXIT = re.compile(r"^\[exit (\d+)\]$")
MASK = re.compile(r"~([-+]?\d[\d,]*(?:\.\d+)?)")
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
GPU_MARK = "# needs a GPU"


@dataclass
class Example:
    path: Path
    line: int                  # 1-based line of the `$ ` line in the file
    command: str
    expected: list[str]        # shown output, with marks
    first: int                 # index into the file's lines of the first shown output line
    end: int                   # index one past the last shown output line
    gpu: bool = False
    exit_code: int = 0
    actual: list[str] = field(default_factory=list)


def parse(path: Path) -> tuple[list[str], list[Example]]:
    """The file's lines and every example in its fenced blocks."""
    lines = path.read_text(encoding="utf-8").split("\n")
    examples: list[Example] = []
    k = 0
    while k < len(lines):
        if not lines[k].startswith("```"):
            k += 1
            continue
        start = k + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        body = range(start, end)
        gpu = start < end and lines[start].strip() == GPU_MARK
        block: list[Example] = []
        for i in body:
            if lines[i].startswith("$ "):
                if block:
                    block[-1].end = i
                block.append(Example(path, i + 1, lines[i][2:].strip(), [], i + 1, end, gpu))
        for ex in block:
            ex.expected = lines[ex.first:ex.end]
            while ex.expected and not ex.expected[-1].strip():
                ex.expected.pop()
            m = EXIT.match(ex.expected[-1].strip()) if ex.expected else None
            if m:
                ex.exit_code = int(m.group(1))
        examples += block
        k = end + 1
    return lines, examples


def run(command: str, hbmlab: Path) -> tuple[int, list[str]]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(hbmlab.parent), str(hbmlab.parent / "tests" / "bench"), env.get("PATH", "")])
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(var, None)
    env["COLUMNS"] = "100"
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=600)
    out = done.stdout.decode("utf-8", errors="replace").split("\n")
    out = [line.rstrip() for line in out]
    while out and not out[-1]:
        out.pop()
    return done.returncode, out


def line_matches(shown: str, real: str) -> bool:
    shown, real = shown.rstrip(), real.rstrip()
    if shown == real:
        return True
    if "~" not in shown:
        return False
    # A masked figure may change width, so runs of spaces are free around it.
    pattern, last = "", 0
    for m in MASK.finditer(shown):
        pattern += re.escape(shown[last:m.start()]) + NUMBER
        last = m.end()
    pattern += re.escape(shown[last:])
    pattern = re.sub(r"(\\ )+", " +", pattern)
    return re.fullmatch(pattern, real) is not None


def compare(ex: Example) -> str | None:
    """None when `ex` shows its real output; otherwise what differs first."""
    shown = ex.expected[:-1] if EXIT.match((ex.expected or [""])[-1].strip()) else ex.expected
    real = ex.actual
    k = 0
    for offset, line in enumerate(shown):
        where = f"{ex.path.relative_to(ROOT)}:{ex.first + offset + 1}"
        m = ELISION.match(line.strip())
        if m:
            k += int(m.group(1))
            if k > len(real):
                return f"{where}: '{line.strip()}' leaves out more lines than the real output has ({len(real)} in all)"
            continue
        if k >= len(real):
            return f"{where}: shown line is not in the real output, which ends after {len(real)} lines\n  shown: {line}"
        if not line_matches(line, real[k]):
            return f"{where}: first differing line (real output line {k + 1})\n  shown: {line}\n  real:  {real[k]}"
        k += 1
    if k < len(real):
        where = f"{ex.path.relative_to(ROOT)}:{ex.first + len(shown)}"
        return f"{where}: the real output goes on after the shown one (line {k + 1} of {len(real)})\n  real:  {real[k]}"
    return None


def remask(shown: str, real: str) -> str:
    """`real` with the figures that `shown` masks masked again (same token positions)."""
    s, r = shown.split(), real.split()
    if "~" not in shown or len(s) != len(r):
        return real
    out, pos = real, 0
    for a, b in zip(s, r):
        at = out.index(b, pos)
        if a.startswith("~") and not b.startswith("~"):
            if out[max(0, at - 2):at] == "  ":  # take the mark's column from the padding
                out, at = out[:at - 1] + "~" + out[at:], at - 1
            else:
                out = out[:at] + "~" + out[at:]
            at += 1
        pos = at + len(b)
    return out


def updated(ex: Example) -> list[str]:
    """The shown output rewritten from the real one, keeping the marks where they stand. A mark
    before the last shown lines leaves out all but those; one before lines in the middle leaves out
    what comes before the place where those lines are found again (else as many lines as before)."""
    shown = ex.expected[:-1] if ex.expected and EXIT.match(ex.expected[-1].strip()) else list(ex.expected)
    real = ex.actual
    out, k, i = [], 0, 0
    while i < len(shown):
        m = ELISION.match(shown[i].strip())
        if not m:
            if k < len(real):
                if line_matches(shown[i], real[k]):
                    out.append(shown[i])  # masked figures keep the values shown
                else:
                    out.append(remask(shown[i], real[k]) if "~" in shown[i] else real[k])
                k += 1
            i += 1
            continue
        run = []
        j = i + 1
        while j < len(shown) and not ELISION.match(shown[j].strip()):
            run.append(shown[j])
            j += 1
        if j == len(shown):  # the shown lines that end the output
            n = len(real) - k - len(run)
        else:
            n = next((start - k for start in range(k, len(real) - len(run) + 1)
                      if all(line_matches(a, real[start + t]) for t, a in enumerate(run))), int(m.group(1)))
        n = max(0, min(n, len(real) - k))
        if n:
            out.append(f"[… {n} line{'s' if n != 1 else ''}]")
        k += n
        i += 1
    out += real[k:]
    return out + ([f"[exit {ex.exit_code}]"] if ex.exit_code else [])


def have_gpu() -> bool:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and b"GPU" in done.stdout


def options_of(help_text: str) -> list[str]:
    """The long options a CLI11 --help (or hbmlab measure's) lists, less --help."""
    found = []
    for line in help_text.split("\n"):
        if not re.match(r"^\s+-", line):
            continue
        for option in re.findall(r"(?<![\w-])--[a-z0-9][a-zA-Z0-9-]*", line):
            if option != "--help" and option not in found:
                found.append(option)
    return found


def check_synopsis(readme: Path, hbmlab: Path) -> int:
    lines = readme.read_text(encoding="utf-8").split("\n")
    try:
        heading = lines.index("## Command line")
        start = next(i for i in range(heading, len(lines)) if lines[i].startswith("```"))
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    except (ValueError, StopIteration):
        print(f"{readme.relative_to(ROOT)}: no '## Command line' section with a fenced synopsis")
        return 1
    # Each subcommand's part of the synopsis: from its `hbmlab NAME` line to the next `hbmlab` line.
    parts: dict[str, tuple[int, str]] = {}
    name = None
    for i in range(start + 1, end):
        m = re.match(r"^hbmlab(?:\s+([a-z]+))?", lines[i])
        if m:
            name = m.group(1) or ""
            parts.setdefault(name, (i + 1, ""))
        if name is not None:
            parts[name] = (parts[name][0], parts[name][1] + "\n" + lines[i])
    _, top = run(f"{hbmlab} --help", hbmlab)
    subcommands = []
    in_subcommands = False
    for line in top:
        if line.startswith("Subcommands:"):
            in_subcommands = True
        elif in_subcommands and re.match(r"^\s+[a-z]+\s", line):
            subcommands.append(line.split()[0])
    failures, checked, answered = [], 0, 0
    for sub in subcommands:
        code, help_lines = run(f"{hbmlab} {sub} --help", hbmlab)
        if code != 0:
            print(f"synopsis: `hbmlab {sub} --help` is not answered by this build (exit {code}): not checked")
            continue
        answered += 1
        if sub not in parts:
            failures.append(f"{readme.relative_to(ROOT)}:{start + 1}: the synopsis has no `hbmlab {sub}` line")
            continue
        line, text = parts[sub]
        for option in options_of("\n".join(help_lines)):
            checked += 1
            if not re.search(re.escape(option) + r"(?![a-z0-9-])", text):
                failures.append(f"{readme.relative_to(ROOT)}:{line}: `hbmlab {sub}` synopsis misses {option} "
                                f"(listed by `hbmlab {sub} --help`)")
    for f in failures:
        print(f)
    if failures:
        return 1
    print(f"synopsis: {checked} options of {answered} subcommands, each in README.md's synopsis")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--hbmlab", type=Path, required=True, help="the hbmlab binary (its folder goes first on PATH)")
    parser.add_argument("--update", action="store_true", help="rewrite the shown outputs from the real ones")
    parser.add_argument("--gpu", action="store_true", help="run only the blocks marked '# needs a GPU'")
    parser.add_argument("--synopsis", action="store_true", help="check the README's synopsis against --help")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    hbmlab = args.hbmlab.resolve()
    if not hbmlab.exists():
        print(f"--hbmlab: {args.hbmlab} does not exist (build it first: make)")
        return 2
    files = [(f if f.is_absolute() else ROOT / f).resolve() for f in args.files]
    if args.synopsis:
        return check_synopsis(files[0], hbmlab)

    examples: list[Example] = []
    texts: dict[Path, list[str]] = {}
    for f in files:
        if not f.exists():
            print(f"{f}: no such file")
            return 2
        texts[f], found = parse(f)
        examples += found
    if args.gpu:
        chosen = [ex for ex in examples if ex.gpu]
        if not chosen:
            print("SKIPPED: no example is marked '# needs a GPU'")
            return SKIP
        if not have_gpu():
            print(f"SKIPPED: {len(chosen)} examples marked '# needs a GPU', and this machine has none (nvidia-smi -L)")
            return SKIP
    else:
        chosen = [ex for ex in examples if not ex.gpu]
        if not chosen:
            print("SKIPPED: every example here is marked '# needs a GPU'" if examples else "no examples ($ lines) here")
            return SKIP if examples else 0

    commands = sorted({ex.command for ex in chosen})
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(zip(commands, pool.map(lambda c: run(c, hbmlab), commands)))

    failures = []
    for ex in chosen:
        code, ex.actual = results[ex.command]
        where = f"{ex.path.relative_to(ROOT)}:{ex.line}"
        if args.update:
            ex.exit_code = code
            continue
        if code != ex.exit_code:
            failures.append(f"{where}: `{ex.command}` exited {code}, the page shows exit {ex.exit_code}\n  "
                            + "\n  ".join(ex.actual[-5:]))
            continue
        diff = compare(ex)
        if diff:
            failures.append(f"{where}: `{ex.command}` prints something else\n{diff}")

    if args.update:
        changed = 0
        for f, lines in texts.items():
            mine = sorted((ex for ex in chosen if ex.path == f), key=lambda ex: ex.first, reverse=True)
            for ex in mine:
                new = updated(ex)
                old = lines[ex.first:ex.end]
                keep = old[len(ex.expected):]  # the empty lines after the shown output
                if new != ex.expected:
                    changed += 1
                lines[ex.first:ex.end] = new + keep
            f.write_text("\n".join(lines), encoding="utf-8")
        print(f"updated {changed} of {len(chosen)} examples in {len(texts)} files; read the diff (git diff) and fix "
              f"the prose that quotes their figures")
        return 0
    for failure in failures:
        print(failure)
    skipped = len(examples) - len(chosen)
    note = f", {skipped} marked '# needs a GPU' not run" if skipped and not args.gpu else ""
    print(f"{len(chosen) - len(failures)} of {len(chosen)} examples print what they show ({len(commands)} commands{note})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
