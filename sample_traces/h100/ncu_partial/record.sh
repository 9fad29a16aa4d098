#!/usr/bin/env bash
# Records the two Nsight Compute reports of this folder (issue 39: partial and failed launches) on one GPU:
#     bash sample_traces/h100/ncu_partial/record.sh OUTDIR
# from the repository root, on a machine with an NVIDIA GPU, python3 with CuPy, and Nsight Compute (`ncu`). Writes:
#     partial.ncu-rep(.gz), partial.log              ncu asked for 120 launches (-c 120) of partial_launches.py and
#                                                     stopped by SIGINT (timeout -s INT 20, as Ctrl-C would) after
#                                                     some tens; if SIGINT leaves no report, the fallback below runs
#     failed_launch.ncu-rep(.gz), failed_launch.log  5 good launches, then a kernel that executes __trap()
# Each .log is ncu's console output with the program's own lines; the commands and exit codes are at its top/end.
set -uo pipefail
out=${1:?usage: record.sh OUTDIR}
here=$(dirname "$0")
mkdir -p "$out"
ncu --version | tail -1 >"$out/ncu_version.txt"

# (b) a failed launch
echo "\$ ncu --clock-control none --set basic -o failed_launch python3 $here/failed_launch.py 5" >"$out/failed_launch.log"
timeout -k 10 60 ncu --clock-control none --set basic -o "$out/failed_launch" \
    python3 "$here/failed_launch.py" 5 >>"$out/failed_launch.log" 2>&1
echo "== exit code $?" >>"$out/failed_launch.log"

# (a) a partial report: stopped by a time limit (SIGINT to ncu and the program, as Ctrl-C) before 120 launches
echo "\$ timeout -s INT 20 ncu --clock-control none --set basic -c 120 -o partial python3 $here/partial_launches.py 400 0.2" >"$out/partial.log"
t0=$SECONDS
timeout -s INT -k 15 20 ncu --clock-control none --set basic -c 120 -o "$out/partial" \
    python3 "$here/partial_launches.py" 400 0.2 >>"$out/partial.log" 2>&1
rc=$?
echo "== exit code $rc after $((SECONDS - t0)) s" >>"$out/partial.log"
if [ ! -e "$out/partial.ncu-rep" ]; then
    # fallback: a program that ends after fewer launches than asked for
    echo "\$ ncu --clock-control none --set basic -c 120 -o partial python3 $here/partial_launches.py 40 0" >"$out/partial_fallback.log"
    timeout -k 10 60 ncu --clock-control none --set basic -c 120 -o "$out/partial" \
        python3 "$here/partial_launches.py" 40 0 >>"$out/partial_fallback.log" 2>&1
    echo "== exit code $?" >>"$out/partial_fallback.log"
fi
for r in partial failed_launch; do
    [ -e "$out/$r.ncu-rep" ] && gzip -9 -n -k "$out/$r.ncu-rep"
done
ls -la "$out"
