#!/usr/bin/env bash
# Records the tensor-core Nsight Compute samples in this folder (see record.py). Run on a machine with an NVIDIA
# GPU, torch and Nsight Compute; it was run on the project's H200 as
#   bash sample_traces/h200/tensor_kernels/record.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
python3 "$here/record.py" "$out"                     # checks every output against float64 first
ncu --clock-control none --set full --nvtx --nvtx-include "profile/" -f -o "$out/tensor" python3 "$here/record.py" "$out"
ncu --import "$out/tensor.ncu-rep" --page raw --csv --print-units base > "$out/tensor_raw_base.csv"
ncu --version > "$out/ncu_version.txt"
