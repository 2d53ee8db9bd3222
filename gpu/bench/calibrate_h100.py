# Calibration figures for hbmlab's timing engine, measured on the GPU at hand (made for the H100).
# Run: python3 gpu/bench/calibrate_h100.py --out calib.json            (timings, no profiler)
#      python3 gpu/bench/calibrate_h100.py --skip copy,chase,gemm --seq-lens 2048,4096 --backends flash,cudnn
#                                           (torch SDPA only: the speed table's PyTorch columns)
#      python3 gpu/bench/calibrate_h100.py --ncu-pass --plan plan.json (the launches ncu profiles;
#      see gpu/bench/calibrate.sh, which runs both and merges the ncu CSV into the JSON).
#
# Measures: device-to-device copy bandwidth (cudaMemcpy and a 16-byte-vector copy kernel; bytes
# read + written), DRAM and L2 latency (one thread chasing a random cyclic permutation of
# 128-byte lines), fp16/bf16 GEMM rate (torch.matmul 8192^3), and torch SDPA forward with the
# flash, cuDNN and math backends across N, d, causal (CUDA-event median after warm-ups).
import argparse
import json
import subprocess
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from merge_ncu import profiled_launch, shape_marker, write_json
from torch_timing import events_summary_ms

REPS = 25
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
HEAD_DIMS = [64, 128]
TOKENS = 256 * 1024          # B·H·N per SDPA run
MATH_MAX_ELEMS = 2 ** 31     # B·H·N² cap for the math backend (S and P materialised)
HEADS = 16

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "math": SDPBackend.MATH}


def device_info():
    p = torch.cuda.get_device_properties(0)
    info = {"name": p.name, "sm_count": p.multi_processor_count,
            "l2_bytes": getattr(p, "L2_cache_size", None), "total_memory_bytes": p.total_memory,
            "compute_capability": f"{p.major}.{p.minor}", "torch": torch.__version__,
            "cuda_runtime_torch": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    for key in ("shared_memory_per_block_optin", "shared_memory_per_multiprocessor",
                "max_threads_per_multi_processor", "regs_per_multiprocessor"):
        if hasattr(p, key):
            info[key] = getattr(p, key)
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
                            "clocks.max.mem,power.limit,temperature.gpu", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
        f = [x.strip() for x in q.split(",")]
        info.update({"driver": f[0], "clock_sm_now": f[1], "clock_mem_now": f[2], "clock_sm_max": f[3],
                     "clock_mem_max": f[4], "power_limit": f[5], "temperature": f[6]})
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        info["nvidia_smi_error"] = str(e)
    try:
        v = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30).stdout
        info["nvcc"] = v.strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        pass
    return info


def copy_bandwidth():
    out = {}
    n_bytes = 4 << 30  # 4 GiB source, far beyond the 50 MB L2
    src = torch.randint(0, 255, (n_bytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = events_summary_ms(lambda: dst.copy_(src), reps=20)
    out["memcpy_d2d"] = {"bytes_copied": n_bytes, "bytes_moved": 2 * n_bytes, **t,
                         "gbps": 2 * n_bytes / (t["median_ms"] * 1e-3) / 1e9,
                         "how": "torch Tensor.copy_ between contiguous uint8 tensors (cudaMemcpyAsync D2D)"}
    try:
        import cupy as cp
        kern = cp.RawKernel(r'''
        extern "C" __global__ void copy16(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
          long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
          long long stride = (long long)gridDim.x * blockDim.x;
          for (; i < n; i += stride) dst[i] = src[i];
        }''', "copy16")
        n16 = n_bytes // 16
        s = cp.from_dlpack(src)
        d = cp.from_dlpack(dst)
        sm = torch.cuda.get_device_properties(0).multi_processor_count
        res = {}
        for blocks_per_sm in (4, 8, 16):
            grid = sm * blocks_per_sm
            fn = lambda: kern((grid,), (512,), (s, d, np.int64(n16)))  # noqa: E731
            t = events_summary_ms(fn, reps=20)
            res[f"grid_{grid}x512"] = {**t, "gbps": 2 * n_bytes / (t["median_ms"] * 1e-3) / 1e9}
        best = max(res.values(), key=lambda r: r["gbps"])
        out["copy_kernel"] = {"bytes_copied": n_bytes, "bytes_moved": 2 * n_bytes, "variants": res,
                              "gbps_best": best["gbps"],
                              "how": "grid-stride int4 (16-byte) copy kernel, 512 threads/CTA"}
    except Exception as e:  # noqa: BLE001
        out["copy_kernel"] = {"error": repr(e)}
    del src, dst
    torch.cuda.empty_cache()
    return out


def pointer_chase():
    """One thread follows next = buf[next] over a random cyclic permutation (Sattolo) of 128-byte
    lines; each step is a dependent load. Footprints below L2 size give L2 latency; far above, DRAM
    (plus TLB misses at the largest footprints, which the figure then includes)."""
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        return {"error": repr(e)}
    kern = cp.RawKernel(r'''
    extern "C" __global__ void chase(const unsigned long long* __restrict__ buf, long long steps,
                                     unsigned long long start, unsigned long long* out, long long* cycles) {
      unsigned long long p = start;
      long long t0 = clock64();
      for (long long s = 0; s < steps; ++s) p = __ldcg(buf + p);
      long long t1 = clock64();
      out[0] = p; cycles[0] = t1 - t0;
    }''', "chase")
    line_words = 16  # 128 bytes / 8
    res = {}
    rng = np.random.default_rng(1234)
    for footprint_mb in (4, 16, 32, 256, 1024, 4096):
        lines = footprint_mb * (1 << 20) // 128
        # Sattolo's algorithm: a single cycle through all lines.
        perm = np.arange(lines, dtype=np.int64)
        idx = rng.permutation(lines)  # visit order; link idx[k] -> idx[k+1]
        nxt = np.empty(lines, dtype=np.int64)
        nxt[idx[:-1]] = idx[1:]
        nxt[idx[-1]] = idx[0]
        del perm
        host = np.zeros(lines * line_words, dtype=np.uint64)
        host[::line_words] = (nxt * line_words).astype(np.uint64)
        buf = cp.asarray(host)
        del host
        out = cp.zeros(1, dtype=cp.uint64)
        cyc = cp.zeros(1, dtype=cp.int64)
        steps = min(200000, lines * 2)
        # warm (loads TLB/L2 as far as they hold), then time
        kern((1,), (1,), (buf, np.int64(min(steps, 20000)), np.uint64(0), out, cyc))
        cp.cuda.Device().synchronize()
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        ev0.record()
        kern((1,), (1,), (buf, np.int64(steps), np.uint64(int(idx[7]) * line_words), out, cyc))
        ev1.record()
        ev1.synchronize()
        ms = cp.cuda.get_elapsed_time(ev0, ev1)
        c = int(cyc.get()[0])
        res[f"{footprint_mb}MB"] = {"footprint_bytes": lines * 128, "steps": steps,
                                    "ns_per_load": ms * 1e6 / steps, "cycles_per_load": c / steps}
        del buf
        cp.get_default_memory_pool().free_all_blocks()
    return {"how": "1 thread, ld.global.cg (L2, not L1) dependent loads over a random single-cycle "
                   "permutation of 128-byte lines; ns from CUDA events over the launch, cycles from clock64",
            "footprints": res}


def gemm_rate():
    out = {}
    n = 8192
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        t = events_summary_ms(lambda: torch.matmul(a, b), reps=20)
        out[name] = {**t, "m": n, "n": n, "k": n, "tflops": 2 * n ** 3 / (t["median_ms"] * 1e-3) / 1e12}
        del a, b
    torch.cuda.empty_cache()
    return out


def sdpa_shapes(seq_lens=SEQ_LENS, head_dims=HEAD_DIMS, backends=("flash", "cudnn", "math")):
    shapes = []
    for d in head_dims:
        for N in seq_lens:
            bh = max(1, TOKENS // N)
            H = min(HEADS, bh)
            B = bh // H
            for causal in (False, True):
                for backend in backends:
                    if backend == "math" and B * H * N * N > MATH_MAX_ELEMS:
                        continue
                    shapes.append({"backend": backend, "B": B, "H": H, "N": N, "d": d, "causal": causal,
                                   "dtype": "fp16"})
    return shapes


def make_qkv(s, gen_seed):
    torch.manual_seed(gen_seed)
    shape = (s["B"], s["H"], s["N"], s["d"])
    return [torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3)]


def sdpa_timings(shapes):
    flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for k, s in enumerate(shapes):
        q, kk, v = make_qkv(s, k)
        fn = lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=s["causal"])  # noqa: E731
        row = dict(s)
        try:
            with sdpa_kernel([BACKENDS[s["backend"]]]):
                reps = 10 if s["backend"] == "math" else REPS
                t = events_summary_ms(fn, reps=reps, warmup=3)
                tf = events_summary_ms(fn, reps=reps, warmup=1, flush=lambda: flush_buf.zero_())
            flops = 4.0 * s["N"] ** 2 * s["d"] * s["B"] * s["H"] / (2 if s["causal"] else 1)
            row.update({"warm_l2": t, "flushed_l2": tf,
                        "tflops": flops / (t["median_ms"] * 1e-3) / 1e12,
                        "tflops_flushed": flops / (tf["median_ms"] * 1e-3) / 1e12})
        except Exception as e:  # noqa: BLE001 - a backend that refuses a shape is recorded as such
            row["error"] = repr(e)[:300]
        rows.append(row)
        print(f"[sdpa] {s['backend']:5s} d={s['d']:3d} N={s['N']:6d} B={s['B']:3d} H={s['H']:2d} "
              f"causal={int(s['causal'])} -> " +
              (f"{row['warm_l2']['median_ms']:.3f} ms {row['tflops']:.1f} TFLOP/s" if "tflops" in row
               else row.get("error", "?")), flush=True)
        del q, kk, v
    torch.cuda.empty_cache()
    return rows


def ncu_pass(shapes):
    """Each shape once inside an NVTX range 'sdpa', preceded by a marker kernel whose grid size is
    the shape's index + 1, so the ncu CSV rows can be assigned to shapes."""
    mark = shape_marker()
    for k, s in enumerate(shapes):
        q, kk, v = make_qkv(s, k)
        try:
            with sdpa_kernel([BACKENDS[s["backend"]]]):
                profiled_launch(lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=s["causal"]), mark, k)
        except Exception as e:  # noqa: BLE001
            print(f"[ncu-pass] shape {k} skipped: {e!r}"[:200], flush=True)
        del q, kk, v
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="calibration.json")
    ap.add_argument("--ncu-pass", action="store_true")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: copy,chase,gemm,sdpa")
    ap.add_argument("--seq-lens", default=",".join(map(str, SEQ_LENS)))
    ap.add_argument("--head-dims", default=",".join(map(str, HEAD_DIMS)))
    ap.add_argument("--backends", default="flash,cudnn,math")
    args = ap.parse_args()
    shapes = sdpa_shapes([int(x) for x in args.seq_lens.split(",")], [int(x) for x in args.head_dims.split(",")],
                         args.backends.split(","))
    if args.ncu_pass:
        ncu_pass(shapes)
        return
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.time()
    result = {"device": device_info(),
              "method": {"timing": f"CUDA events, median of {REPS} (math backend 10) after warm-ups",
                         "sdpa_tokens_per_run": TOKENS, "sdpa_flops": "4*N^2*d*B*H, halved when causal",
                         "l2_flush": "256 MiB memset between reps in the flushed_l2 figures"}}
    if "copy" not in skip:
        result["copy_bandwidth"] = copy_bandwidth()
        print("[copy]", json.dumps(result["copy_bandwidth"])[:400], flush=True)
    if "chase" not in skip:
        result["latency"] = pointer_chase()
        print("[chase]", json.dumps(result["latency"])[:600], flush=True)
    if "gemm" not in skip:
        result["gemm"] = gemm_rate()
        print("[gemm]", json.dumps(result["gemm"]), flush=True)
    if "sdpa" not in skip:
        result["sdpa_shapes"] = shapes
        result["sdpa"] = sdpa_timings(shapes)
    result["elapsed_s"] = time.time() - t0
    write_json(args.out, result)


if __name__ == "__main__":
    main()
