#!/usr/bin/env bash
# Exports that no public repository has, made on the GPU machine with Nsight Compute 2025.3.1 (no GPU needed for
# the --import exports; the torch report needs one):
#   1. raw-page and details-page CSVs of the public reports of tests/corpus (ncu 2020.3-2023.1 reports exported by
#      ncu 2025.3.1: OUR exports of PUBLIC reports, said so in tests/corpus/manifest.json);
#   2. the default details-page export (no --print-details all: no NUMA Affinity section, no GPU name) of the H200
#      report sample_traces/h200/chapter5_kernels/full.ncu-rep.gz (issue 11, item 1);
#   3. a small PyTorch report (aten kernels in anonymous namespaces, integer and bool template arguments) with its
#      raw and details exports, to check one canonical kernel name across .ncu-rep, raw and details CSV.
# Run from the repository root on the GPU machine:
#   bash sample_traces/corpus_exports/record.sh OUTDIR
# Files to bring back (5): OUTDIR/public_reports_exports.tar.gz, OUTDIR/h200_full_details_default.csv.gz,
#   OUTDIR/torch_names.ncu-rep.gz, OUTDIR/torch_names_raw.csv.gz, OUTDIR/torch_names_details.csv.gz
#   (+ OUTDIR/ncu_version.txt)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$here}
mkdir -p "$out" "$out/public"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. the public reports of the corpus, exported
for rep in esmm-research/profile_output.ncu-rep speedy-scan/profile.ncu-rep ncar-gpu-workshop/MW_Baseline.ncu-rep \
           self-join-mistic/profile.out.ncu-rep indexspaces-jl/profile.ncu-rep \
           physicell-fork/profile.nsight-cuprof-report; do
  base=$(echo "$rep" | tr '/' '_' | sed 's/\.ncu-rep$//; s/\.nsight-cuprof-report$//')
  gunzip -c "$repo/tests/corpus/$rep.gz" > "$work/$base.ncu-rep"
  ncu --import "$work/$base.ncu-rep" --page raw --csv --print-units base > "$out/public/${base}_raw_base.csv"
  ncu --import "$work/$base.ncu-rep" --page details --csv > "$out/public/${base}_details.csv"
done
tar -C "$out" -czf "$out/public_reports_exports.tar.gz" public

# 2. the default details export of the H200 report
gunzip -c "$repo/sample_traces/h200/chapter5_kernels/full.ncu-rep.gz" > "$work/full.ncu-rep"
ncu --import "$work/full.ncu-rep" --page details --csv | gzip -9 -n > "$out/h200_full_details_default.csv.gz"

# 3. PyTorch kernels under ncu (--set basic keeps the report small), with both exports
ncu --clock-control none --set basic -f -o "$work/torch_names" python3 "$here/record_torch.py"
gzip -9 -n -c "$work/torch_names.ncu-rep" > "$out/torch_names.ncu-rep.gz"
ncu --import "$work/torch_names.ncu-rep" --page raw --csv --print-units base | gzip -9 -n > "$out/torch_names_raw.csv.gz"
ncu --import "$work/torch_names.ncu-rep" --page details --csv | gzip -9 -n > "$out/torch_names_details.csv.gz"
ncu --version > "$out/ncu_version.txt"
ls -l "$out"
