"""An issue-order model of one SM running a kernel's main loop, read from the kernel's SASS.

The SM's four sub-partitions each hold one warp of every resident CTA; each warp issues the loop's
instructions in order under the compiler's control codes (the stall count before its next
instruction, the scoreboards an instruction sets and the ones it waits on), one instruction a cycle
per sub-partition, each on its pipe at the pipe's rate, loads from shared memory through the SM's one
128-byte-a-clock port, cp.async copies arriving from the L2 and written through the same port,
barriers across the CTA's four warps. The rates and latencies are the ones gpu/bench measured
(scenarios/gpus/h100-sxm.toml); the few it did not measure are marked below. Nothing is fitted to an
attention kernel's time. The loop is the common path of the kernel's main loop: a full K/V block, not
the ragged or masked one, with the next block's copies issued.

Run: python3 gpu/bench/sass_issue.py SASS [--kernel REGEX] [--ctas 1,2] [--iterations 10] [--offset CYCLES]
  SASS: `cuobjdump -sass` output (plain or .gz); one line a kernel whose mangled name matches REGEX
  and a number of CTAs an SM: its cycles a step (the mean over iterations 4 to the last of the CTAs'
  steps, the warps' state shares beside it). flash2_residency.sh runs it on hbmlab's flash2 forward
  (assets/measurements/h100-flash2-residency.txt)."""
from __future__ import annotations

import argparse
import collections
import gzip
import re
import sys
from dataclasses import dataclass

# Per SM clock, on one sub-partition unless said; h100-sxm.toml's sources and gpu/bench's files.
RATES = dict(
    hmma_cycles=6.0,  # mma.sync m16n8k16: 0.666 warp instructions a clock an SM (pipes.cu)
    hmma_latency=24,  # accumulator to the next MMA (latency.cu)
    mufu_cycles=8,  # ex2: 0.5 warp instructions a clock an SM (pipes.cu)
    mufu_latency=18,  # not measured
    alu_cycles=2,  # integer and compare pipe: 16 lanes a sub-partition (the whitepaper)
    fma_cycles=2,  # each of the two FP32 halves (heavy, lite): FFMA 1 a clock together (pipes.cu)
    ldsm_latency=30,  # ldmatrix.x4 to its reader: 39 from an address, less its two integer ops (latency.cu)
    lds_latency=23,  # ld.shared (latency.cu)
    shfl_latency=24,  # shfl.sync (latency.cu)
    local_latency=32,  # not measured
    const_latency=8,  # not measured
    special_latency=20,  # S2R, S2UR, R2UR; not measured
    barrier_cycles=20,  # bar.sync with 4 warps (latency.cu)
    mio_queue=8,  # shared-memory instructions a sub-partition holds before it stalls; not measured
    l2_latency=306,  # 175 ns at 1.75 GHz (calibration-h100.json, pointer chase)
    l2_bytes_per_cycle=23.8,  # 5,500 GB/s over 132 SMs at 1.75 GHz (h100-sxm.toml's l2_bandwidth_gbps)
    copy_tag_wavefronts=1.25,  # a 512-byte global access takes 5.25 wavefronts, 4 of them the data (lsu_pipe.cu)
)


@dataclass
class Instr:
    addr: int
    text: str
    op: str  # the opcode with its modifiers
    base: str  # the opcode alone
    never: bool  # @!PT: issued, does nothing
    stall: int
    wb: int  # scoreboard set until the result is written (7: none)
    rb: int  # scoreboard set until the sources are read (7: none)
    wait: int  # mask of scoreboards waited on


def read_functions(path: str) -> dict[str, str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    parts = re.split(r"\n\s*Function : (\S+)\n", "\n" + text)
    return {parts[k]: parts[k + 1] for k in range(1, len(parts), 2)}


def parse(text: str) -> list[Instr]:
    """Each instruction with its control code: bits 41-63 of the second 64-bit word (Volta onwards)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        m = re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?);\s*/\* 0x[0-9a-f]{16} \*/", lines[i])
        if not m:
            i += 1
            continue
        hi = int(re.search(r"/\* (0x[0-9a-f]{16}) \*/", lines[i + 1]).group(1), 16)
        c = (hi >> 41) & 0x7FFFFF
        text = m.group(2).strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        out.append(Instr(int(m.group(1), 16), text, op, op.split(".")[0], text.startswith("@!PT"),
                         c & 0xF, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 0x3F))
        i += 2
    return out


def branch_target(ins: Instr) -> int | None:
    m = re.search(r"\bBRA (0x[0-9a-f]+)", ins.text)
    return int(m.group(1), 16) if m else None


def loop_body(instrs: list[Instr]) -> list[Instr]:
    """The common path through the main loop (the backward branch whose loop holds most HMMA): at a
    conditional forward branch, the side that issues cp.async copies if only one does, else the
    shorter (the full block, not the ragged or masked one)."""
    at = {ins.addr: k for k, ins in enumerate(instrs)}
    loops = [(k, at[t]) for k, ins in enumerate(instrs) if (t := branch_target(ins)) is not None and t < ins.addr]
    if not loops:
        return []
    end, head = max(loops, key=lambda kh: sum(instrs[j].base == "HMMA" for j in range(kh[1], kh[0])))
    copies = lambda r: any(instrs[j].base == "LDGSTS" for j in r)
    path, k = [], head
    while k <= end:
        ins, t = instrs[k], branch_target(instrs[k])
        if t is None or k == end:
            path.append(ins)
            k += 1
            continue
        if not ins.text.startswith("@"):  # the jump over an else side
            k = at[t]
            continue
        target, join = at[t], at[t]
        fall = range(k + 1, target)
        last = instrs[target - 1]
        if (j := branch_target(last)) is not None and not last.text.startswith("@") and j > instrs[target].addr:
            join = at[j]
        taken = range(target, join)
        take = copies(taken) if copies(taken) != copies(fall) else len(taken) < len(fall)
        path.append(ins)
        k = target if take else k + 1
    return path


def pipe_of(ins: Instr, heavy_free: float, lite_free: float) -> tuple[str | None, float]:
    b, r = ins.base, RATES
    if ins.never or b in ("NOP", "BRA", "EXIT", "DEPBAR", "LDGDEPBAR", "BAR", "LDC", "S2R", "CS2R", "S2UR",
                          "R2UR", "ULDC", "WARPSYNC"):
        return None, 0
    if b == "HMMA":
        return "tensor", r["hmma_cycles"]
    if b == "MUFU":
        return "xu", r["mufu_cycles"]
    if b in ("FFMA", "FMUL", "FADD"):
        return ("heavy" if heavy_free <= lite_free else "lite"), r["fma_cycles"]
    if b in ("IMAD", "IMUL"):
        return "heavy", r["fma_cycles"]
    if b in ("LDSM", "LDS", "STS", "SHFL", "LDL", "STL", "LDGSTS", "LDG", "STG", "RED", "ATOM", "ATOMS"):
        return "mio", 1
    if b.startswith("U"):
        return "uniform", 1
    return "alu", r["alu_cycles"]


def wavefronts(ins: Instr) -> float:
    if ins.base in ("SHFL", "LDL", "STL"):
        return 1
    if ins.base == "LDSM":
        return 4 if ins.op.endswith(".4") else 2 if ins.op.endswith(".2") else 1
    m = re.search(r"\.(32|64|128)\b", ins.op)
    return {32: 1, 64: 2, 128: 4}[int(m.group(1)) if m else 32]


class Group:
    """A cp.async group (LDGDEPBAR): released once every copy of it is written to shared memory."""

    def __init__(self, copies: list[list[float]]):
        self.copies = copies

    def done_at(self) -> float | None:
        return max((c[0] for c in self.copies), default=0.0) if all(c for c in self.copies) else None


def simulate(body: list[Instr], ctas: int, warps_per_cta: int = 4, iterations: int = 10, offset: int = 0):
    """Cycles a step of each CTA, and the warps' state shares (wait, selected, scoreboard, pipe, ...)."""
    r, n = RATES, len(body)
    warps = [dict(cta=w // warps_per_cta, sub=(w % warps_per_cta) % 4, pc=0, it=0, next=(w // warps_per_cta) * offset,
                  sb=[[] for _ in range(6)], copies=[], bar=None, bars=0, last=-1, done=False, starts=[])
             for w in range(ctas * warps_per_cta)]
    for w in warps:
        w["sb"][0] = [0.0]  # the first block's copies, in before the loop
    free = collections.defaultdict(float)  # (sub-partition, pipe) -> free at
    port, l2 = [0.0], [0.0]  # the shared-memory port and the SM's share of the L2: free at
    arriving = []  # (cycle, wavefronts, where its write completes)
    mio = collections.defaultdict(list)  # sub-partition -> service starts of its shared-memory instructions
    barriers = collections.defaultdict(list)
    states = collections.Counter()

    def released(x, now):
        if isinstance(x, Group):
            d = x.done_at()
            return d is not None and d <= now
        return x <= now

    def through_port(wf, at):
        start = max(at, port[0])
        port[0] = start + wf
        return start

    t = 0
    while not all(w["done"] for w in warps):
        arriving.sort(key=lambda a: a[0])
        while arriving and arriving[0][0] <= t:
            cycle, wf, done = arriving.pop(0)
            done.append(through_port(wf, cycle) + wf)
        for w in warps:
            if not w["done"] and (w["bar"] is not None or w["next"] > t):
                states["barrier" if w["bar"] is not None else "wait"] += 1
        for sub in range(4):
            ready = [w for w in warps if w["sub"] == sub and not w["done"] and w["bar"] is None and w["next"] <= t]
            ready.sort(key=lambda w: w["last"])  # the warp that issued least recently first
            issued = False
            for w in ready:
                ins = body[w["pc"]]
                if not all(released(x, t) for b in range(6) if ins.wait >> b & 1 for x in w["sb"][b]):
                    states["scoreboard"] += 1
                    continue
                pipe, cycles = pipe_of(ins, free[(sub, "heavy")], free[(sub, "lite")])
                if pipe and free[(sub, pipe)] > t:
                    states["pipe"] += 1
                    continue
                if pipe == "mio" and sum(1 for s in mio[sub] if s > t) >= r["mio_queue"]:
                    states["mio queue"] += 1
                    continue
                if ins.base == "DEPBAR":
                    m = re.search(r"SB(\d), (0x[0-9a-f]+)", ins.text)
                    if sum(1 for x in w["sb"][int(m.group(1))] if not released(x, t)) > int(m.group(2), 16):
                        states["copies"] += 1
                        continue
                if issued:
                    states["not selected"] += 1
                    continue
                issued = True
                states["selected"] += 1
                if pipe:
                    free[(sub, pipe)] = t + cycles
                done_at = t + 1
                if ins.never:
                    pass
                elif ins.base == "HMMA":
                    done_at = t + r["hmma_latency"]
                elif ins.base == "MUFU":
                    done_at = t + r["mufu_latency"]
                elif ins.base in ("LDSM", "LDS", "STS", "SHFL", "LDL", "STL"):
                    start = through_port(wavefronts(ins), t)
                    mio[sub].append(start)
                    done_at = start + {"LDSM": r["ldsm_latency"], "LDS": r["lds_latency"], "SHFL": r["shfl_latency"],
                                       "LDL": r["local_latency"]}.get(ins.base, 4)
                elif ins.base == "LDGSTS":
                    start = through_port(r["copy_tag_wavefronts"], t)
                    mio[sub].append(start)
                    arrive = max(start + r["l2_latency"], l2[0])
                    l2[0] = arrive + 512 / r["l2_bytes_per_cycle"]
                    done: list[float] = []
                    arriving.append((arrive, 4, done))
                    w["copies"].append(done)
                    done_at = start + 2
                elif ins.base == "LDGDEPBAR":
                    w["sb"][0].append(Group(w["copies"]))
                    w["copies"] = []
                elif ins.base == "LDC":
                    done_at = t + r["const_latency"]
                elif ins.base in ("S2R", "S2UR", "R2UR"):
                    done_at = t + r["special_latency"]
                if ins.wb != 7 and ins.base != "LDGDEPBAR":
                    w["sb"][ins.wb].append(done_at)
                if ins.rb != 7:
                    w["sb"][ins.rb].append(t + 2)
                if ins.base == "BAR":
                    w["bars"] += 1
                    key = (w["cta"], w["bars"])
                    barriers[key].append(w)
                    w["bar"] = key
                    if len(barriers[key]) == warps_per_cta:
                        for x in barriers.pop(key):
                            x["bar"] = None
                            x["next"] = max(x["next"], t + r["barrier_cycles"])
                w["next"] = max(w["next"], t + max(1, ins.stall))
                w["last"] = t
                w["pc"] += 1
                if w["pc"] == 1:
                    w["starts"].append(t)
                if w["pc"] == n:
                    w["pc"], w["it"] = 0, w["it"] + 1
                    if w["it"] >= iterations:
                        w["done"] = True
                        w["starts"].append(t)
        if t % 64 == 0:
            for w in warps:
                w["sb"] = [[x for x in sb if not released(x, t)] for sb in w["sb"]]
        t += 1
        if t > 50_000_000:
            raise RuntimeError("the loop never finishes (a scoreboard or barrier nothing releases)")
    per_cta = []
    for c in range(ctas):
        starts = [w["starts"] for w in warps if w["cta"] == c]
        first, last = max(s[3] for s in starts), max(s[iterations - 1] for s in starts)
        per_cta.append((last - first) / (iterations - 4))
    total = sum(states.values())
    return sum(per_cta) / len(per_cta), {k: v / total for k, v in states.most_common()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass")
    ap.add_argument("--kernel", default=".", help="regular expression on the mangled name")
    ap.add_argument("--ctas", default="1,2", help="CTAs an SM, comma-separated")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--offset", type=int, default=0, help="cycles each CTA starts after the one before")
    a = ap.parse_args(argv)
    for name, text in read_functions(a.sass).items():
        if not re.search(a.kernel, name):
            continue
        body = loop_body(parse(text))
        if not body:
            continue
        ops = collections.Counter(i.base for i in body)
        for ctas in (int(c) for c in a.ctas.split(",")):
            cycles, states = simulate(body, ctas, iterations=a.iterations, offset=a.offset)
            shares = " ".join(f"{k} {v * 100:.1f}%" for k, v in states.items())
            print(f"{name} ctas={ctas} cycles_per_step={cycles:.0f} loop={len(body)} HMMA={ops['HMMA']} "
                  f"MUFU={ops['MUFU']} LDSM={ops['LDSM']} LDGSTS={ops['LDGSTS']} stall_sum="
                  f"{sum(max(1, i.stall) for i in body)} | {shares}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
