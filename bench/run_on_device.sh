#!/usr/bin/env bash
# Runs the kernelscope microbenchmark suite on the GPU machine and leaves what must come back in $OUT
# (at most 8 files there: the result JSON, the log, the Nsight Compute reports as one .tar.gz).
#
#   smoke (2-3 min):       bash bench/run_on_device.sh smoke
#   full  (under 7 min):  bash bench/run_on_device.sh full
#   extra arguments go to the suite, e.g.  bash bench/run_on_device.sh full --device 1
#
# Both run with --ncu (Nsight Compute reruns of the suite's own kernels, --clock-control none).
# The suite writes its JSON after every case, so a run cut short by the timeout still returns results.
set -uo pipefail
mode=${1:-smoke}; shift || true
: "${OUT:=$(pwd)/bench_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
work=/tmp/ks-bench-$mode
rm -rf "$work"; mkdir -p "$work"
case "$mode" in
  smoke) flags=(--quick --ncu); limit=360 ;;
  full)  flags=(--ncu);         limit=540 ;;
  *) echo "usage: $0 smoke|full [suite args]" >&2; exit 2 ;;
esac
{
  echo "== $(date -u +%FT%TZ) kernelscope bench $mode on $(hostname)"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,memory.used --format=csv
  ncu --version 2>&1 | tail -1
  python3 -c 'import torch, triton, cupy; print("torch", torch.__version__, "triton", triton.__version__, "cupy", cupy.__version__, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$OUT/$mode.log"
timeout -k 15 "$limit" python3 -m collectors.bench.run --out "$work" "${flags[@]}" "$@" 2>&1 | tee -a "$OUT/$mode.log"
rc=${PIPESTATUS[0]}
echo "== suite exit code $rc" | tee -a "$OUT/$mode.log"
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv 2>&1 | tee -a "$OUT/$mode.log"
cp "$work"/bench_*.json "$OUT"/ 2>/dev/null || echo "no result JSON written" | tee -a "$OUT/$mode.log"
if [ -d "$work/ncu" ]; then
  tar -C "$work" -czf "$OUT/ncu_$mode.tar.gz" ncu
fi
ls -la "$OUT"
exit "$rc"
