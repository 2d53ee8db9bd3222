# CUDA-event timing shared by the PyTorch comparison scripts (block_sparse_speed.py, decode_speed.py):
# the median of REPS launches after WARMUP, `flush` run before each (outside the timed region).
REPS, WARMUP = 50, 5


def events_median_ms(fn, flush, reps=REPS, warmup=WARMUP):
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        flush()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]
