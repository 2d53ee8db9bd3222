#!/usr/bin/env bash
# Do lines a power of two apart alias in the GPU's L2? gpu/bench/l2_alias.cu under Nsight Compute,
# merged by l2_alias_merge.py into one record file.
# Run: gpu/bench/l2_alias.sh OUTDIR     (writes OUTDIR/l2-alias.json; needs nvcc and ncu)
exec "$(dirname "$0")/l2_micro.sh" l2_alias alias_kernel "${1:?usage: l2_alias.sh OUTDIR}"
