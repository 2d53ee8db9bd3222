#!/usr/bin/env python3
"""The CTA schedule the GPU ran (hbmlab_cta_schedule) beside the one the timing engine predicts
(hbmlab simulate --timeline), for the same flash2 launch.

Run: gpu/bench/cta_schedule_compare.py --gpu h200 SCHEDULE.json [SCHEDULE.json ...]
     (HBMLAB=path/to/hbmlab, default build/hbmlab)

Per file it prints, measured against predicted:
  span      first CTA start to last CTA end
  CTA time  mean duration of the CTAs by Q block (the first, middle and last quarter of i)
  spread    how much CTAs with the same amount of work differ: the mean over Q blocks of the
            standard deviation of their durations over their mean
  in flight (batch, head) instances with a CTA running, averaged over the span
  K/V reach K and V bytes those instances' running CTAs reach (causal: Q block i reaches
            K_0 .. K_i), averaged over the span: what the L2 must hold for K/V reads to hit
  order     share of CTAs that start before the CTA ahead of them in the grid
  first SMs distinct SMs among the first sm_count CTAs (breadth first: all of them)
"""
import json
import os
import subprocess
import sys
import tempfile


def load_engine(hbmlab, gpu, sched):
    p, b = sched["problem"], sched["blocks"]
    launch = sched.get("launch", {})
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        cmd = [hbmlab, "simulate", "--gpu", gpu, "--algo", "flash2", "--numerics", "off",
               "--batch", str(p["batch"]), "--heads", str(p["heads"]), "--seq-len", str(p["seq_len"]),
               "--head-dim", str(p["head_dim"]), "--block-rows", str(b["Br"]), "--block-cols", str(b["Bc"]),
               "--launch-threads", str(launch.get("threads_per_cta", 128)), "--timeline", trace]
        if "registers_per_thread" in launch:
            cmd += ["--launch-registers", str(launch["registers_per_thread"])]
        if "smem_bytes_per_cta" in launch:
            cmd += ["--launch-smem-bytes", str(launch["smem_bytes_per_cta"])]
        if p["causal"]:
            cmd.append("--causal")
        if sched.get("kv_descending"):
            cmd.append("--kv-descending")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        events = json.load(open(trace))["traceEvents"]
    spans = {}
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == 1:
            cta = int(e["name"].rsplit(" ", 1)[1])
            spans[cta] = (e["tid"], e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3)  # ns
    return [spans[c] for c in sorted(spans)]


def metrics(spans, sched, sm_count):
    """spans: [(sm, start_ns, end_ns)] by linear CTA index."""
    p, b = sched["problem"], sched["blocks"]
    rows = -(-p["seq_len"] // b["Br"])
    t0 = min(s for _, s, _ in spans)
    t1 = max(e for _, _, e in spans)
    out = {"span_us": (t1 - t0) / 1e3}
    by_block = {}
    for c, (_, s, e) in enumerate(spans):
        by_block.setdefault(c % rows, []).append(e - s)
    q = max(1, rows // 4)
    for name, lo, hi in (("first", 0, q), ("middle", rows // 2 - q // 2, rows // 2 - q // 2 + q), ("last", rows - q, rows)):
        d = [x for i in range(lo, hi) for x in by_block[i]]
        out[f"cta_{name}_us"] = sum(d) / len(d) / 1e3
    cvs = []
    for d in by_block.values():
        m = sum(d) / len(d)
        if m > 0 and len(d) > 1:
            cvs.append((sum((x - m) ** 2 for x in d) / (len(d) - 1)) ** 0.5 / m)
    out["spread"] = sum(cvs) / len(cvs)
    # Instances in flight and their K/V reach, as step functions over time.
    kv_row_bytes = 2 * p["head_dim"] * 2  # K and V, fp16
    events = []
    for c, (_, s, e) in enumerate(spans):
        events.append((s, 1, c))
        events.append((e, -1, c))
    events.sort()
    live = {}  # instance -> {Q block: count}
    area_inst = area_reach = 0.0
    last_t = t0
    for t, kind, c in events:
        inst, i = divmod(c, rows)
        width = t - last_t
        area_inst += width * len(live)
        reach = 0
        for blocks in live.values():
            top = max(blocks) if p["causal"] else rows - 1
            reach += min(p["seq_len"], (top + 1) * b["Br"]) * kv_row_bytes
        area_reach += width * reach
        last_t = t
        if kind > 0:
            live.setdefault(inst, {}).setdefault(i, 0)
            live[inst][i] += 1
        else:
            live[inst][i] -= 1
            if live[inst][i] == 0:
                del live[inst][i]
            if not live[inst]:
                del live[inst]
    out["in_flight"] = area_inst / (t1 - t0)
    out["kv_reach_mib"] = area_reach / (t1 - t0) / 2**20
    starts = [s for _, s, _ in spans]
    out["out_of_order"] = sum(1 for n in range(1, len(starts)) if starts[n] < starts[n - 1] - 500) / (len(starts) - 1)
    out["first_sms"] = len({sm for sm, _, _ in spans[:sm_count]})
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--gpu":
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    gpu, files = args[1], args[2:]
    hbmlab = os.environ.get("HBMLAB", "build/hbmlab")
    keys = [("span_us", "span µs", "{:.0f}"), ("cta_first_us", "CTA first ¼ µs", "{:.1f}"),
            ("cta_middle_us", "CTA middle ¼ µs", "{:.1f}"), ("cta_last_us", "CTA last ¼ µs", "{:.1f}"),
            ("spread", "spread", "{:.1%}"), ("in_flight", "in flight", "{:.1f}"),
            ("kv_reach_mib", "K/V reach MiB", "{:.1f}"), ("out_of_order", "order", "{:.1%}"),
            ("first_sms", "first SMs", "{:d}")]
    for path in files:
        sched = json.load(open(path))
        sm_count = sched["device"]["sm_count"]
        measured = metrics([(sm, s, e) for _, sm, s, e in sched["ctas"]], sched, sm_count)
        engine = load_engine(hbmlab, gpu, sched)
        # The engine's tid is SM × slots + slot; only distinct SMs matter here.
        slots = max(1, (max(t for t, _, _ in engine) + 1) // sm_count)
        predicted = metrics([(t // slots, s, e) for t, s, e in engine], sched, sm_count)
        p = sched["problem"]
        print(f"{os.path.basename(path)}: B={p['batch']} H={p['heads']} N={p['seq_len']} d={p['head_dim']} "
              f"{'causal' if p['causal'] else 'full'} {sched['blocks']['Br']}x{sched['blocks']['Bc']} "
              f"{'desc' if sched.get('kv_descending') else 'asc'}, {sched['device']['name']} against {gpu}")
        print(f"  {'':<16} {'measured':>10} {'engine':>10}")
        for key, label, fmt in keys:
            print(f"  {label:<16} {fmt.format(measured[key]):>10} {fmt.format(predicted[key]):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
