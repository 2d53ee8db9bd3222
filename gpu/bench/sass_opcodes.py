"""Opcode histogram per kernel of `cuobjdump -sass` output on stdin: one line a kernel, its mangled
name and its 8 most frequent opcodes (OPCODE:count), so a microbenchmark's record shows that the loop
of each case is the instruction it names. Used by pipes.sh and latency.sh."""
import collections
import re
import sys

name, hist = None, collections.Counter()


def flush():
    if name:
        print(name, " ".join(f"{op}:{n}" for op, n in hist.most_common(8)))


for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        flush()
        name, hist = m.group(1), collections.Counter()
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", line)
    if m:
        hist[m.group(1)] += 1
flush()
