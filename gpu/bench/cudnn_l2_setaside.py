# cuDNN's forward (PyTorch SDPA) at the shapes whose DRAM reads the engine's L2 model misses, with part of
# the L2 set aside (and PyTorch's FlashAttention-2 forward at two of them): cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, X) and a buffer of X bytes read
# through a stream whose access-policy window marks its lines persisting, so that the kernel, whose own
# lines are normal, is left the rest of the L2. Nsight Compute runs with --cache-control none (its flush
# would free the set-aside lines too), so this script empties the L2 itself before each profiled kernel
# (writes a buffer of 256 MB, then re-reads the set-aside buffer). After each cuDNN kernel a probe re-reads
# the set-aside buffer: its DRAM reads say how much of it stayed in the L2 through the kernel.
# Each profiled shape runs inside an NVTX range "sdpa" after a marker kernel hbmlab_marker whose grid
# size is its index + 1 (index = size index * shape count + shape index).
# Run: gpu/bench/cudnn_l2_setaside.sh OUTDIR   (ncu, then this script's --merge: OUTDIR/h100-cudnn-l2-setaside.json)
import ctypes
import sys

from merge_ncu import kernels_by_marker, ncu_pass_or_merge, shape_marker, write_json

# DRAM and time only: one pass, so Nsight Compute replays nothing and the L2 is as the script left it.
METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum", "launch__grid_size",
           "launch__block_size", "launch__shared_mem_per_block_dynamic", "launch__registers_per_thread"]
MB = 1 << 20
# Asked for (MiB; the driver grants whole ways of the L2, 3.125 MiB each on the H100, rounding up),
# capped at the device's largest set-aside; 0 again at the end: run to run.
SET_ASIDE_MB = (0, 8, 16, 24, 30, 0)


def shapes():
    return [{"backend": "cudnn", "B": 1, "H": 4, "N": 65536, "d": 128, "causal": True, "dtype": "fp16"},
            {"backend": "cudnn", "B": 1, "H": 4, "N": 32768, "d": 128, "causal": False, "dtype": "fp16"},
            {"backend": "cudnn", "B": 1, "H": 8, "N": 65536, "d": 64, "causal": False, "dtype": "fp16"},
            {"backend": "cudnn", "B": 1, "H": 8, "N": 65536, "d": 128, "causal": False, "dtype": "fp16"},
            {"backend": "cudnn", "B": 1, "H": 8, "N": 32768, "d": 128, "causal": False, "dtype": "fp16"},
            # PyTorch's FlashAttention-2 kernel, whose tile order the engine knows, at two of those shapes
            {"backend": "flash", "B": 1, "H": 4, "N": 65536, "d": 128, "causal": True, "dtype": "fp16"},
            {"backend": "flash", "B": 1, "H": 4, "N": 32768, "d": 128, "causal": False, "dtype": "fp16"}]


class Driver:
    """The few CUDA driver calls the set-aside needs, through ctypes (PyTorch exposes none of them)."""
    LIMIT_PERSISTING_L2 = 0x06
    ATTR_L2_SIZE = 38
    ATTR_MAX_PERSISTING_L2 = 108
    STREAM_ATTR_ACCESS_POLICY_WINDOW = 1
    PROP_NORMAL, PROP_PERSISTING = 0, 2

    class Window(ctypes.Structure):
        _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                    ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int), ("pad", ctypes.c_char * 36)]

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, rc, what):
        if rc != 0:
            sys.exit(f"cudnn_l2_setaside.py: {what} failed (CUresult {rc})")

    def attribute(self, attr):
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, 0), f"cuDeviceGetAttribute({attr})")
        return v.value

    def set_aside(self, nbytes):
        self.check(self.lib.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
        self.check(self.lib.cuCtxSetLimit(self.LIMIT_PERSISTING_L2, ctypes.c_size_t(nbytes)), "cuCtxSetLimit")
        got = ctypes.c_size_t()
        self.check(self.lib.cuCtxGetLimit(ctypes.byref(got), self.LIMIT_PERSISTING_L2), "cuCtxGetLimit")
        return got.value

    def window(self, stream, ptr, nbytes):
        w = self.Window(ctypes.c_void_p(ptr), ctypes.c_size_t(nbytes), ctypes.c_float(1.0 if nbytes else 0.0),
                        self.PROP_PERSISTING if nbytes else self.PROP_NORMAL, self.PROP_NORMAL)
        self.check(self.lib.cuStreamSetAttribute(ctypes.c_void_p(stream), self.STREAM_ATTR_ACCESS_POLICY_WINDOW,
                                                 ctypes.byref(w)), "cuStreamSetAttribute")


def sizes(drv):
    top = drv.attribute(Driver.ATTR_MAX_PERSISTING_L2)
    return [m for m in SET_ASIDE_MB[:-1] if m * MB <= top], top


def ncu_pass():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    drv = Driver()
    ms, top = sizes(drv)
    ms = ms + [0] if ms[-1] else ms
    print(f"L2 {drv.attribute(Driver.ATTR_L2_SIZE)} bytes, largest set-aside {top} bytes; set-asides (MB): {ms}")
    mark = shape_marker()
    flush = torch.empty(256 * MB, dtype=torch.uint8, device="cuda")
    aside = torch.ones(max(ms) * MB // 4 or 1, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    ss = shapes()
    granted = []
    for i, m in enumerate(ms):
        got = drv.set_aside(m * MB)
        drv.window(side.cuda_stream, aside.data_ptr(), m * MB)
        print(f"set-aside {m} MB: limit {got} bytes")
        granted.append(got)
        part = aside[: m * MB // 4]
        for k, s in enumerate(ss):
            gen = torch.Generator(device="cuda").manual_seed(k)
            q, kk, v = (torch.randn(s["B"], s["H"], s["N"], s["d"], device="cuda", dtype=torch.float16,
                                    generator=gen) for _ in range(3))
            backend = SDPBackend.CUDNN_ATTENTION if s["backend"] == "cudnn" else SDPBackend.FLASH_ATTENTION
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, kk, v, is_causal=s["causal"])  # cuDNN builds its plan
                torch.cuda.synchronize()
                flush.fill_(k + 1)
                torch.cuda.synchronize()
                if m:
                    with torch.cuda.stream(side):
                        part.sum()
                    torch.cuda.synchronize()
                torch.cuda.nvtx.range_push("sdpa")
                mark(i * len(ss) + k)
                F.scaled_dot_product_attention(q, kk, v, is_causal=s["causal"])
                torch.cuda.synchronize()
                if m:
                    with torch.cuda.stream(side):
                        part.sum()  # the probe: its DRAM reads are the set-aside lines the kernel evicted
                    torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
            del q, kk, v
    drv.set_aside(0)
    print(f"granted (bytes): {','.join(str(g) for g in granted)}")


def merge(ncu_csv, out_path, ms, granted):
    import torch
    ss = shapes()
    ks = kernels_by_marker(ncu_csv, len(ms) * len(ss), METRICS)
    print(f"{'shape':<34} {'set-aside MiB':>13} {'DRAM rd MB':>10} {'excess MB':>9} {'probe rd MB':>11} {'us':>8}"
          "   (excess: DRAM reads less Q, K and V once)")
    rows = []
    for i, m in enumerate(ms):
        for k, s in enumerate(ss):
            got = ks[i * len(ss) + k]
            sdpa = [x for x in got if "reduce_kernel" not in (x["kernel"] or "")]
            probe = [x for x in got if x not in sdpa]
            rec = dict(s)
            rec["l2_set_aside_asked_bytes"] = m * MB
            rec["l2_set_aside_bytes"] = granted[i]  # what the driver set: the L2 the kernel lost
            rec["ncu_kernels"] = sdpa
            rec["probe_kernels"] = probe
            rows.append(rec)
            if not sdpa:
                continue
            rd = sum(x["dram__bytes_read.sum"] or 0 for x in sdpa) / 1e6
            qkv = 3 * s["B"] * s["H"] * s["N"] * s["d"] * 2 / 1e6
            pr = sum(x["dram__bytes_read.sum"] or 0 for x in probe) / 1e6
            us = sum(x["gpu__time_duration.sum"] or 0 for x in sdpa) / 1e3
            label = f"{s['backend']} d={s['d']} N={s['N'] // 1024}K H={s['H']} {'causal' if s['causal'] else 'full'}"
            print(f"{label:<34} {granted[i] / MB:>13.3f} {rd:>10.1f} {rd - qkv:>9.1f} {pr:>11.1f} {us:>8.1f}")
    doc = {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()},
           "method": {"counters": "ncu --clock-control none --cache-control none; before each profiled kernel a "
                                  "256 MB buffer is written and the set-aside buffer re-read through the persisting "
                                  "window; after it the set-aside buffer is read again (the probe)",
                      "set_aside": "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, X) and a stream access-policy "
                                   "window over X bytes, hitRatio 1, hitProp persisting",
                      "command": "gpu/bench/cudnn_l2_setaside.sh OUTDIR"},
           "sdpa": rows}
    write_json(out_path, doc)
    print(f"wrote {out_path}")


def merge_args(args):
    if not args.sizes or not args.granted:
        sys.exit("cudnn_l2_setaside.py: --merge needs --sizes and --granted (from the ncu pass's log)")
    ms = [int(x) for x in args.sizes.split(",")]
    granted = [int(x) for x in args.granted.split(",")]
    if len(ms) != len(granted):
        sys.exit(f"cudnn_l2_setaside.py: --sizes has {len(ms)} entries, --granted {len(granted)}")
    merge(*args.merge, ms, granted)


def options(ap):
    ap.add_argument("--sizes", required=False, help="the set-asides (MiB) the ncu pass asked for, comma-separated")
    ap.add_argument("--granted", required=False, help="the bytes the driver set aside for each, comma-separated")


def main():
    ncu_pass_or_merge("cudnn_l2_setaside.py: --ncu-pass (under ncu) or --merge NCU_CSV OUT_JSON --sizes MIB,... "
                      "--granted B,...", ncu_pass, merge_args, options)


if __name__ == "__main__":
    main()
