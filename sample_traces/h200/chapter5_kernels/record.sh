#!/usr/bin/env bash
# Records the Nsight Compute samples in this folder. Run on a machine with an NVIDIA GPU, CUDA 12.4+ and
# Nsight Compute; it was run on the project's H200 (CUDA 13.0, driver 580, Nsight Compute 2025.3.1) as
#   bash sample_traces/h200/chapter5_kernels/record.sh OUTDIR
# --clock-control none leaves the GPU's clocks as they are (the lab machine forbids changing them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
nvcc -O3 -gencode=arch=compute_90,code=sm_90 -I"$here/../../../collectors/bench/kernels" -o "$out/ks_samples" "$here/ks_samples.cu"
"$out/ks_samples"                     # checks every kernel's output; exits non-zero on a wrong result
sel='regex:ks_(copy|transpose|colread|matmul)'
ncu --clock-control none --set full  --kernel-name "$sel" -f -o "$out/full"  "$out/ks_samples"
ncu --clock-control none --set basic --kernel-name "$sel" -f -o "$out/basic" "$out/ks_samples"
# CSV exports: raw page with auto-scaled units (ncu's default) and with base units; details page both ways.
ncu --import "$out/full.ncu-rep" --page raw --csv                      > "$out/full_raw.csv"
ncu --import "$out/full.ncu-rep" --page raw --csv --print-units base   > "$out/full_raw_base.csv"
ncu --import "$out/full.ncu-rep" --page details --csv --print-details all > "$out/full_details.csv"
ncu --import "$out/full.ncu-rep" --page details --csv --print-details all --print-units base --print-metric-name name > "$out/full_details_base.csv"
# ncu's default details export (no --print-details all: no NUMA Affinity section, so no GPU name); this file was
# made 2026-12-01 by sample_traces/corpus_exports/record.sh from the full.ncu-rep.gz committed here
ncu --import "$out/full.ncu-rep" --page details --csv                 > "$out/full_details_default.csv"
ncu --import "$out/basic.ncu-rep" --page raw --csv                     > "$out/basic_raw.csv"
ncu --version > "$out/ncu_version.txt"
