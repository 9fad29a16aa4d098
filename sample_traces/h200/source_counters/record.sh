#!/usr/bin/env bash
# Records an Nsight Compute report with source-level counters AND CUDA source lines: the chapter-5 sample
# kernels (../chapter5_kernels/ks_samples.cu) compiled with -lineinfo, profiled with the Source Counters section
# (warp-state samples and instructions executed per SASS instruction) and the CUDA source imported into the
# report. Run on a machine with an NVIDIA GPU, CUDA 12.4+ and Nsight Compute, from the repository root:
#   bash sample_traces/h200/source_counters/record.sh OUTDIR
# It writes OUTDIR/source.ncu-rep.gz and OUTDIR/ncu_version.txt (bring back both, into this folder).
# --clock-control none leaves the GPU's clocks as they are (the lab machine forbids changing them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../chapter5_kernels
out=${1:-$here}
mkdir -p "$out"
nvcc -O3 -lineinfo -gencode=arch=compute_90,code=sm_90 -I"$here/../../../collectors/bench/kernels" \
     -o "$out/ks_samples_lineinfo" "$src/ks_samples.cu"
"$out/ks_samples_lineinfo"                  # checks every kernel's output; exits non-zero on a wrong result
sel='regex:ks_(copy|transpose|colread|matmul)'
# --set full includes the Source Counters section (../chapter5_kernels/full.ncu-rep, recorded with --set full, has
# them per SASS instruction); --import-source yes stores the .cu file, -lineinfo maps each instruction to its line
ncu --clock-control none --set full --import-source yes --kernel-name "$sel" \
    -f -o "$out/source" "$out/ks_samples_lineinfo"
gzip -9 -f "$out/source.ncu-rep"
ncu --version > "$out/ncu_version.txt"
ls -l "$out/source.ncu-rep.gz"
