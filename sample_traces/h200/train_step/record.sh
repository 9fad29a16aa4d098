#!/usr/bin/env bash
# Records one program twice, as users do: a PyTorch profiler trace of training steps 4..8, and Nsight Compute on
# step 6 of the same program (--set full): its NVTX push/pop range "step_6/" (the kernels launched from the main
# thread: forward and optimizer) and its start/end range "whole_step_6" (every kernel of the step), plus a window
# chosen by launch count (--launch-skip/--launch-count, --set basic). Run on the project's H200 (torch 2.11+cu130, Nsight Compute
# 2025.3.1, driver 580) as
#   bash sample_traces/h200/train_step/record.sh OUTDIR
# --clock-control none leaves the clocks as they are (the lab machine forbids changing them); --cache-control none
# keeps the caches as the program leaves them, as in the traced run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
python3 "$here/train_step.py" trace "$out"
ncu --clock-control none --cache-control none --set full --nvtx --nvtx-include "step_6/" \
    -f -o "$out/train_step_ncu_nvtx" python3 "$here/train_step.py" plain "$out/ncu_nvtx_run"
ncu --clock-control none --cache-control none --set full --nvtx --nvtx-include "whole_step_6" \
    -f -o "$out/train_step_ncu_whole" python3 "$here/train_step.py" plain "$out/ncu_whole_run"
ncu --clock-control none --cache-control none --set basic --launch-skip 40 --launch-count 12 \
    -f -o "$out/train_step_ncu_window" python3 "$here/train_step.py" plain "$out/ncu_window_run"
ncu --version > "$out/ncu_version.txt"
