#!/usr/bin/env bash
# Does a working set fit the GPU's L2 equally well wherever it lies? gpu/bench/l2_layout.cu under
# Nsight Compute, merged by l2_layout_merge.py into one record file.
# Run: gpu/bench/l2_layout.sh OUTDIR     (writes OUTDIR/l2-layout.json; needs nvcc and ncu)
#      LAYOUTS="128:256 128:512" FRACTIONS="0.5 0.6" gpu/bench/l2_layout.sh OUTDIR
#                                        (regions:strides in KiB, working sets as shares of the L2)
exec "$(dirname "$0")/l2_micro.sh" l2_layout layout_kernel "${1:?usage: l2_layout.sh OUTDIR}"
