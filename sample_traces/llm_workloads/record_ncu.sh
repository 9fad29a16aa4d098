#!/usr/bin/env bash
# Nsight Compute of real programs for the textbook's models on real kernels (issue 44), one folder per GPU:
# one steady token of the eager and the torch.compile decode (record.py, NVTX range token_8) and step 6 of the
# H200 training-step program (../h200/train_step/train_step.py, NVTX start/end range whole_step_6: every kernel of
# the step, the backward pass's too, which autograd launches from its own thread), each beside a
# PyTorch profiler trace of the same program with shapes (record_shapes) so `kernelscope join` can pair every
# profiled launch with its aten op and input shapes.
#
# Only the sections and counters the analysis reads are collected (SpeedOfLight, LaunchStats, Occupancy,
# MemoryWorkloadAnalysis and the FLOP counters), with ncu's default cache control (caches flushed before each
# launch, so DRAM bytes are the launch's own traffic). What is committed is the raw page exported as CSV in base
# units: a .ncu-rep embeds the CUDA modules of the kernels it profiles, and libtorch's modules make the eager
# token's report about 130 MB (README.md).
#   bash sample_traces/llm_workloads/record_ncu.sh OUTDIR [traces] [eager] [graph] [compile] [train]
# traces: the decode traces (record.py OUTDIR --schedule eager compile) and the training step's; with no word
# after OUTDIR, all four.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?OUTDIR}; shift
what=" ${*:-traces eager compile train} "
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors.sum
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct
metrics+=,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp16.sum
metrics+=,sm__ops_path_tensor_src_tf32_dst_fp32.sum,sm__ops_path_tensor_src_fp8_sparsity_off.sum
metrics+=,sm__ops_path_tensor_src_fp64.sum,smsp__inst_executed.sum
metrics+=,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed
metrics+=,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed
metrics+=,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed,smsp__cycles_elapsed.avg.per_second
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
ncu_run() {  # name nvtx-filter command...
  local name=$1 filter=$2; shift 2
  ncu --clock-control none --nvtx --nvtx-include "$filter" --section SpeedOfLight --section LaunchStats \
      --section Occupancy --section MemoryWorkloadAnalysis --metrics "$metrics" -f -o "$out/$name" "$@" \
      > "$out/$name.log" 2>&1
  ncu --import "$out/$name.ncu-rep" --page raw --csv --print-units base | gzip -9 -n > "$out/${name}_raw.csv.gz"
}
ncu --version > "$out/ncu_version.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"
if [[ $what == *" traces "* ]]; then
  python3 "$here/record.py" "$out" --schedule eager compile
  python3 "$here/../h200/train_step/train_step.py" trace "$out"
fi
if [[ $what == *" eager "* ]]; then
  ncu_run decode_eager_token8 "token_8/" python3 "$here/record.py" "$out/ncu_run" eager --ncu
fi
if [[ $what == *" compile "* ]]; then
  ncu_run decode_compile_token8 "token_8/" python3 "$here/record.py" "$out/ncu_run" compile --ncu
fi
if [[ $what == *" train "* ]]; then
  ncu_run train_step_ncu_whole6 "whole_step_6" python3 "$here/../h200/train_step/train_step.py" plain "$out/ncu_run"
fi
if [[ $what == *" graph "* ]]; then       # not in the default list: the CUDA-graph decode (kernels of the replays)
  ncu_run decode_graph_token8 "token_8/" python3 "$here/record.py" "$out/ncu_run" graph --ncu
fi
