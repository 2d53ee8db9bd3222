# The helpers the PyTorch scripts of gpu/bench share (torch_timing.py, merge_ncu.profiled_launch), run
# against a stand-in for torch.cuda that records what is called, so they are checked without a GPU.
# Run: python3 tests/scripts/test_bench_helpers.py   (ctest -R scripts:)
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gpu", "bench"))

log = []
clock = [0.0]


class Event:
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self):
        self.at = clock[0]
        log.append("record")

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at


torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(
    Event=Event,
    synchronize=lambda: log.append("sync"),
    nvtx=types.SimpleNamespace(range_push=lambda name: log.append("push " + name), range_pop=lambda: log.append("pop")))
sys.modules["torch"] = torch

import merge_ncu  # noqa: E402
import torch_timing  # noqa: E402


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


# A launch that takes 5, 1, 4, 2, 3, … ms in turn; the warm-ups take 100 each and must not be timed.
durations = iter([100, 100, 5, 1, 4, 2, 3])


def launch():
    log.append("fn")
    clock[0] += next(durations)


times = torch_timing.events_times_ms(launch, lambda: log.append("flush"), reps=5, warmup=2)
check(times == [1, 2, 3, 4, 5], f"events_times_ms: the timed launches, sorted; got {times}")
check(log[:3] == ["fn", "fn", "sync"], f"events_times_ms: warm-ups, then a synchronize; got {log[:3]}")
check(log[3:7] == ["flush", "record", "fn", "record"], f"events_times_ms: the flush outside the events; got {log[3:7]}")

durations = iter([9, 3, 1, 2])
check(torch_timing.events_median_ms(launch, None, reps=3, warmup=1) == 2, "events_median_ms: the median")
durations = iter([9, 3, 1, 2, 8])
summary = torch_timing.events_summary_ms(launch, reps=4, warmup=1)
check(summary == {"median_ms": 3, "min_ms": 1, "max_ms": 8, "reps": 4}, f"events_summary_ms: got {summary}")

log.clear()
merge_ncu.profiled_launch(lambda: log.append("fn"), lambda k: log.append(f"mark {k}"), 7)
check(log == ["fn", "sync", "push sdpa", "mark 7", "fn", "sync", "pop"],
      f"profiled_launch: a warm-up, then the marked launch inside the range ncu profiles; got {log}")
log.clear()
merge_ncu.profiled_launch(lambda: log.append("fn"))
check(log == ["fn", "sync", "push sdpa", "fn", "sync", "pop"], f"profiled_launch without a marker; got {log}")
# join_ncu_logs: two ncu --log-file CSVs (their "==" lines and the units row of the second dropped), one
# missing; every column in the raw table, the kept ones by regular expression.
import csv
import tempfile
import join_ncu_logs

with tempfile.TemporaryDirectory() as tmp:
    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path
    first = write("a.csv", '==PROF== Connected\n"ID","Kernel Name","x.sum","y.pct"\n"","","byte","%"\n'
                           '"0","qk","1,024","50"\n')
    second = write("b.csv", '"ID","Kernel Name","x.sum","z.sum"\n"","","byte","byte"\n"0","pv","2","3"\n')
    raw, kept = os.path.join(tmp, "raw.csv"), os.path.join(tmp, "kept.csv")
    join_ncu_logs.main(["test", raw, kept, r"^(Kernel Name|x\.sum)$", first, os.path.join(tmp, "none.csv"), second])
    raw_rows, kept_rows = list(csv.reader(open(raw))), list(csv.reader(open(kept)))
    check(raw_rows[0] == ["ID", "Kernel Name", "x.sum", "y.pct", "z.sum"], f"join_ncu_logs: every column; got {raw_rows[0]}")
    check([r[1] for r in raw_rows[1:]] == ["", "qk", "pv"], f"join_ncu_logs: one units row, then the kernels; got {raw_rows}")
    check(kept_rows == [["Kernel Name", "x.sum"], ["", "byte"], ["qk", "1,024"], ["pv", "2"]],
          f"join_ncu_logs: the kept columns; got {kept_rows}")
print("bench helpers: ok")
