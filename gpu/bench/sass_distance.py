"""How far ahead of its first reader each variable-latency result is issued, in the main loop of each
kernel of `cuobjdump -sass` output on stdin: for ldmatrix (LDSM), exp2 (MUFU) and shuffles (SHFL),
the instructions and MMAs (HMMA) between the producer and the first instruction that reads one of
its registers; and how many exps issue among the P̃V MMAs (after the first HMMA that follows an exp). A warp waits on such a result (ncu's short-scoreboard stall) unless the work between
covers its latency. The main loop: from the last barrier before the first HMMA to the branch after
the last HMMA. Used by fwd_stall_ncu.sh.
Run: zcat fwd-stall-sass.txt.gz | python3 gpu/bench/sass_distance.py"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_issue  # noqa: E402

KINDS = ("LDSM", "MUFU", "SHFL")


def instructions(text):
    """(opcode, registers) of each instruction (sass_issue.parse), predicates dropped; the destination is
    the first register."""
    return [(i.op, [int(r) for r in re.findall(r"\bR(\d+)\b", re.sub(r"^@!?U?P\w+\s+", "", i.text))])
            for i in sass_issue.parse(text)]


def main_loop(ins):
    mma = [i for i, (op, _) in enumerate(ins) if op.startswith("HMMA")]
    if not mma:
        return []
    first = max((i for i, (op, _) in enumerate(ins[: mma[0]]) if op.startswith("BAR")), default=0)
    last = mma[-1]
    while last + 1 < len(ins) and not ins[last][0].startswith("BRA"):
        last += 1
    return ins[first : last + 1]


def report(name, ins):
    loop = main_loop(ins)
    if not loop:
        return
    mmas = sum(op.startswith("HMMA") for op, _ in loop)
    exps = [i for i, (op, _) in enumerate(loop) if op.startswith("MUFU")]
    # The exps issued after the first MMA that follows an exp (P̃V's): among that GEMM's MMAs.
    pv = next((i for i, (op, _) in enumerate(loop) if op.startswith("HMMA") and exps and i > exps[0]), len(loop))
    print(f"{name}: main loop {len(loop)} instructions, {mmas} HMMA, {len(exps)} MUFU "
          f"({sum(i > pv for i in exps)} after the first HMMA that follows one)")
    for kind in KINDS:
        gaps = []
        for i, (op, regs) in enumerate(loop):
            if op.split(".")[0] != kind or not regs:
                continue
            width = 4 if kind == "LDSM" and ".4" in op else 2 if kind == "LDSM" and ".2" in op else 1
            dest = set(range(regs[0], regs[0] + width))
            for j in range(i + 1, len(loop)):
                if dest & set(loop[j][1][1:]):  # a source operand (the destination is the first register)
                    between = loop[i + 1 : j]
                    gaps.append((len(between), sum(o.startswith("HMMA") for o, _ in between)))
                    break
        if gaps:
            near = sum(1 for n, _ in gaps if n < 8)
            print(f"  {kind:4} {len(gaps):3}: {sum(n for n, _ in gaps) / len(gaps):5.1f} instructions "
                  f"({sum(m for _, m in gaps) / len(gaps):4.1f} HMMA) to the first reader on average; "
                  f"{near} read within 8 instructions")


def main():
    text = sys.stdin.read()
    for part in re.split(r"\n\s*Function : ", "\n" + text)[1:]:
        name = part.split("\n", 1)[0].strip()
        m = re.search(r"flash2_kernelI6__halfLi(\d+)ELi(\d+)ELi(\d+)E", name)
        report(f"flash2_kernel<half, d = {m[1]}, {m[2]} x {m[3]}>" if m else name, instructions(part))


if __name__ == "__main__":
    main()
