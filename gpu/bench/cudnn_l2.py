# PyTorch SDPA's cuDNN forward (sm_90: one persistent CTA per SM, a 64x128xd consumer tile) around
# d = 128, N = 64K, H = 4, B = 1, causal, with the L2's counters per partition: the near partition's
# lookups (srcunit tex, hit and miss) and what crossed between the two partitions (srcunit ltcfabric).
# Each shape runs once unprofiled (cuDNN builds its plan), then once inside an NVTX range "sdpa" after
# a marker kernel whose grid size is the shape's index + 1.
# Run: gpu/bench/cudnn_l2.sh OUTDIR   (ncu, then this script's --merge: OUTDIR/h100-cudnn-l2.json)
from merge_ncu import kernels_by_marker, ncu_pass_or_merge, num, profiled_launch, read_rows, shape_marker, write_json

L2_METRICS = ["lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
              "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "lts__t_sectors_srcunit_ltcfabric.sum",
              "lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum", "lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum",
              "dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum", "launch__grid_size",
              "launch__block_size", "launch__shared_mem_per_block_dynamic", "launch__registers_per_thread"]


def shapes():
    out = []
    for d in (128, 64):
        for N, H in ((65536, 4), (65536, 8), (32768, 4), (32768, 8)):
            for causal in (True, False):
                out.append({"backend": "cudnn", "B": 1, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16"})
    return out


def ncu_pass():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mark = shape_marker()
    for k, s in enumerate(shapes()):
        gen = torch.Generator(device="cuda").manual_seed(k)
        q, kk, v = (torch.randn(s["B"], s["H"], s["N"], s["d"], device="cuda", dtype=torch.float16, generator=gen)
                    for _ in range(3))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            profiled_launch(lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=s["causal"]), mark, k)
        del q, kk, v


def line(label, k):
    mb = lambda x: (x or 0) / 1e6  # noqa: E731
    sec = lambda m: (k.get(m) or 0) * 32  # noqa: E731
    return (f"{label:<34} {mb(k.get('dram__bytes_read.sum')):>8.1f} {mb(sec('lts__t_sectors_srcunit_tex_op_read.sum')):>9.1f}"
            f" {mb(sec('lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum')):>9.1f}"
            f" {mb(sec('lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum')):>9.1f}"
            f" {mb(sec('lts__t_sectors_srcunit_ltcfabric.sum')):>9.1f} {(k.get('gpu__time_duration.sum') or 0) / 1e3:>9.1f}"
            f" {k.get('launch__grid_size') or 0:>6.0f} {k.get('launch__block_size') or 0:>5.0f}")


HEADER = (f"{'kernel':<34} {'DRAM rd':>8} {'L2 rd':>9} {'near hit':>9} {'near miss':>9} {'fabric':>9} {'us':>9}"
          f" {'grid':>6} {'block':>5}   (MB; near hit/miss: srcunit tex lookups; fabric: srcunit ltcfabric sectors)")


def merge(ncu_csv, out_path, extra):
    import torch
    ss = shapes()
    ks = kernels_by_marker(ncu_csv, len(ss), L2_METRICS)
    print(HEADER)
    records = []
    for k, s in enumerate(ss):
        rec = dict(s)
        rec["ncu_kernels"] = ks[k]
        records.append(rec)
        for x in ks[k]:
            label = f"cudnn d={s['d']} N={s['N'] // 1024}K H={s['H']} {'causal' if s['causal'] else 'full'}"
            print(line(label, x))
    hb = {}
    for name, path in extra:  # hbmlab's own kernels at d = 128, N = 64K, H = 4, causal
        rows = [r for r in read_rows(path) if "hbmlab_marker" not in r.get("Kernel Name", "")]
        if rows:
            k = {"kernel": rows[0].get("Kernel Name"), "grid": rows[0].get("Grid Size")}
            k.update({m: num(rows[0].get(m, "")) for m in L2_METRICS if rows[0].get(m) is not None})
            hb[name] = k
            print(line(f"hbmlab {name} d=128 N=64K H=4 causal", k))
    doc = {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()},
           "method": {"counters": "ncu --clock-control none --cache-control all (L2 flushed before each profiled "
                                  "kernel), one profiled launch per shape after an unprofiled warm-up",
                      "command": "gpu/bench/cudnn_l2.sh OUTDIR",
                      "l2": "near hit / near miss: lts__t_sectors_srcunit_tex_op_read_lookup_{hit,miss} (the "
                            "reading SM's own partition); fabric: lts__t_sectors_srcunit_ltcfabric (sectors that "
                            "crossed between the two partitions)"},
           "sdpa": records, "hbmlab_kernels": hb}
    write_json(out_path, doc)
    print(f"wrote {out_path}")


def main():
    ncu_pass_or_merge("cudnn_l2.py: --ncu-pass (under ncu) or --merge NCU_CSV OUT_JSON [--hbmlab NAME CSV]...",
                      ncu_pass, lambda args: merge(*args.merge, args.hbmlab),
                      lambda ap: ap.add_argument("--hbmlab", nargs=2, action="append", default=[],
                                                 metavar=("NAME", "NCU_CSV")))


if __name__ == "__main__":
    main()
