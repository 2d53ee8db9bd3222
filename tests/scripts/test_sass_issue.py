# gpu/bench/sass_issue.py against small loops written in cuobjdump's format, whose cycles a step follow
# by hand from the control codes and the rates the script takes (sass_issue.RATES).
# Run: python3 tests/scripts/test_sass_issue.py   (ctest -R scripts:)
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gpu", "bench"))

import sass_issue  # noqa: E402


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def listing(*instructions):
    """cuobjdump lines: (text, stall, write scoreboard, wait mask) each, then a branch back to the top."""
    lines = []
    for k, (text, stall, wb, wait) in enumerate(instructions + (("BRA 0x0", 1, 7, 0),)):
        ctrl = stall | (wb << 5) | (7 << 8) | (wait << 11)
        lines.append(f"        /*{k * 16:04x}*/                   {text} ;   /* 0x{0:016x} */")
        lines.append(f"                                                       /* 0x{ctrl << 41:016x} */")
    return "\n".join(lines)


def steps(text, ctas):
    body = sass_issue.loop_body(sass_issue.parse(text))
    cycles, _ = sass_issue.simulate(body, ctas, iterations=8)
    return body, cycles


r = sass_issue.RATES

# Four independent MMAs 6 cycles apart: one warp a sub-partition issues them, then the branch.
mmas = listing(*[("HMMA.16816.F32 R0, R4, R8, R0", 6, 7, 0)] * 4)
body, one = steps(mmas, 1)
check(len(body) == 5 and [i.stall for i in body] == [6, 6, 6, 6, 1], f"control codes read: {[i.stall for i in body]}")
check(one == 4 * 6 + 1, f"one CTA: 4 MMAs at their stall counts and a branch take 25 cycles, got {one}")
# Two warps a sub-partition share its tensor pipe: eight MMAs at the pipe's rate a step, a branch at most
# taking a cycle from it when it meets the other warp's MMA (one instruction a cycle).
_, two = steps(mmas, 2)
check(8 * r["hmma_cycles"] <= two <= 8 * r["hmma_cycles"] + 2, f"two CTAs: the tensor pipe's 8 x 6 cycles a step, got {two}")

# An MMA waiting on the ldmatrix before it (scoreboard 0) waits out the load's latency.
load = listing(("LDSM.16.M88.4 R4, [R2]", 1, 0, 0), ("HMMA.16816.F32 R0, R4, R8, R0", 6, 7, 0b000001))
body, one = steps(load, 1)
check(body[1].wait == 1 and body[0].wb == 0, "scoreboards read from the control code")
check(one == r["ldsm_latency"] + 6 + 1, f"one CTA: the load's {r['ldsm_latency']} cycles, the MMA's 6, the branch: got {one}")

# A barrier holds each warp until the CTA's four have reached it, then the barrier's cycles.
bar = listing(("BAR.SYNC.DEFER_BLOCKING 0x0", 1, 7, 0), ("FFMA R0, R1, R2, R0", 4, 7, 0))
_, one = steps(bar, 1)
check(one == r["barrier_cycles"] + 4 + 1, f"one CTA: the barrier's {r['barrier_cycles']} cycles, the FMA's 4, the branch: got {one}")

# The common path: a forward branch over a ragged-block copy is taken when the other side copies too.
ragged = "\n".join([
    "        /*0000*/                   @P0 BRA 0x40 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0010*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0020*/                   BRA 0x60 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0030*/                   NOP ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0040*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64], !P1 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0050*/                   LDGSTS.E.BYPASS.128 [R1+0x10], desc[UR4][R2.64], !P1 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
    "        /*0060*/                   HMMA.16816.F32 R0, R4, R8, R0 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{6 << 41:016x} */",
    "        /*0070*/                   BRA 0x0 ;   /* 0x0000000000000000 */",
    f"                                                       /* 0x{1 << 41:016x} */",
])
body = sass_issue.loop_body(sass_issue.parse(ragged))
check([i.addr for i in body] == [0x0, 0x10, 0x60, 0x70], f"the shorter copying side: {[hex(i.addr) for i in body]}")
print("sass_issue: 5 checks passed")
