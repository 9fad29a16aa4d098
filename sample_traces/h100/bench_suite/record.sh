#!/usr/bin/env bash
# Records the microbenchmark suite sample in this folder on one GPU (the project's lent H100), with Nsight Compute:
#     bash sample_traces/h100/bench_suite/record.sh OUTDIR
# from the repository root, on a machine with an NVIDIA GPU, python3 with torch, Triton and CuPy, Nsight Compute
# (`ncu`, run with --clock-control none) and the CUDA toolkit's nvcc (for the C++ launch floor). It writes to OUTDIR:
#     bench_<gpu>_<uuid8>.json.gz   the result document (what `kernelscope ingest` reads)
#     bench.log                     nvidia-smi before and after, versions, the suite's progress and summary
#     ncu_reports.tar.gz            the Nsight Compute reports of the suite's own kernels and their launch manifests
# The suite stops starting cases after 270 s and ends its ncu reruns by 400 s (collectors/bench/run.py BUDGET_S):
# the whole script took about 3 minutes on the H200 (sample_traces/h200/bench_suite/) and takes at most about 8.
set -uo pipefail
out=${1:?usage: record.sh OUTDIR}
mkdir -p "$out"
work=$(mktemp -d /tmp/ks-bench-XXXXXX)
log="$out/bench.log"
{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) kernelscope bench full on $(hostname)"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.current.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,memory.used --format=csv
  ncu --version | tail -1
  command -v nvcc >/dev/null && nvcc --version | tail -1
  python3 -c "import torch, triton, cupy; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__, 'gpus', torch.cuda.device_count())"
} >"$log" 2>&1
PYTHONUNBUFFERED=1 timeout 510 python3 -m collectors.bench.run --out "$work" --ncu >>"$log" 2>&1
rc=$?
{
  echo "== suite exit code $rc"
  nvidia-smi --query-gpu=index,clocks.current.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
} >>"$log" 2>&1
for f in "$work"/bench_*.json; do
  [ -e "$f" ] && gzip -9 -c "$f" >"$out/$(basename "$f").gz"
done
if [ -d "$work/ncu" ]; then
  tar -C "$work" -czf "$out/ncu_reports.tar.gz" ncu
fi
ls -la "$out" >>"$log"
exit $rc
