# CUDA-event timing shared by the PyTorch scripts of gpu/bench (calibrate_h100.py, block_sparse_speed.py,
# decode_speed.py, backward_speed.py, flash3_torch.py): REPS launches after WARMUP, each timed by CUDA
# events, `flush` (when given) run before each, outside the timed region.
REPS, WARMUP = 50, 5


def events_times_ms(fn, flush=None, reps=REPS, warmup=WARMUP):
    """The times of `reps` launches of fn in ms, sorted, after `warmup` untimed ones."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if flush is not None:
            flush()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times


def events_median_ms(fn, flush, reps=REPS, warmup=WARMUP):
    times = events_times_ms(fn, flush, reps, warmup)
    return times[len(times) // 2]


def events_summary_ms(fn, flush=None, reps=REPS, warmup=WARMUP):
    """The median, fastest and slowest launch, as the calibration files record a timing."""
    times = events_times_ms(fn, flush, reps, warmup)
    return {"median_ms": times[len(times) // 2], "min_ms": times[0], "max_ms": times[-1], "reps": reps}
