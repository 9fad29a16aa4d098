"""`--ncu`: rerun the suite's custom kernels under Nsight Compute and attach the counters to the
cases.

For each case of `cases.NCU_CASES` the parent starts

    ncu --clock-control none --metrics <METRICS> --kernel-name regex:^<prefix> -f -o <report>
        python3 -m collectors.bench.run --ncu-child <case> --device N --out <manifest.jsonl>

The child runs the case with `ctx.ncu_child` set: each custom kernel is launched once and listed, in
launch order, in the manifest (kernel name and the case's params). The parent pairs the report's
profiled kernels with the manifest lines in order and turns the counters into records with source
"ncu counter" and the same params as the case's event-timing records. Where counters are forbidden
(ERR_NVGPUCTRPERM in ncu's output) that is recorded once and the stage stops.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from collectors.bench.harness import make_record
from collectors.errors import COUNTER_PERMISSION, counters_forbidden

REPO_ROOT = Path(__file__).resolve().parents[2]

#: record metric -> (ncu metric, unit, scale)
COUNTERS = {
    "kernel_duration": ("gpu__time_duration.sum", "s", 1e-9),
    "dram_read_bytes": ("dram__bytes_read.sum", "B", 1),
    "dram_write_bytes": ("dram__bytes_write.sum", "B", 1),
    "l2_read_from_l1_bytes": ("lts__t_sectors_srcunit_tex_op_read.sum", "B", 32),  # sectors x 32 B
    "shared_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "count", 1),
    "shared_ld_bank_conflicts": (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "count",
        1,
    ),
    "shared_ld_requests": ("smsp__sass_inst_executed_op_shared_ld.sum", "count", 1),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", 1),
    "theoretical_occupancy": ("sm__maximum_warps_per_active_cycle_pct", "%", 1),
    "occupancy_limit_registers": ("launch__occupancy_limit_registers", "count", 1),
    "occupancy_limit_shared_mem": ("launch__occupancy_limit_shared_mem", "count", 1),
    "occupancy_limit_warps": ("launch__occupancy_limit_warps", "count", 1),
    "occupancy_limit_blocks": ("launch__occupancy_limit_blocks", "count", 1),
    "registers_per_thread": ("launch__registers_per_thread", "count", 1),
    "smem_config_bytes": ("launch__shared_mem_config_size", "B", 1),
    "warp_instructions": ("smsp__inst_executed.sum", "count", 1),
    "sm_clock": ("gpc__cycles_elapsed.avg.per_second", "Hz", 1),
    "l1_hit_rate": ("l1tex__t_sector_hit_rate.pct", "%", 1),
}
#: the same names, metrics and factors as analyzers.cases.counters.NCU_COUNTERS (a test keeps them
#: equal), which the predictions' mechanisms read when a run is read
SM_CLOCK = "gpc__cycles_elapsed.avg.per_second"
METRICS = sorted({m for m, _, _ in COUNTERS.values()} | {SM_CLOCK})

_SHARED = ["shared_ld_wavefronts", "shared_ld_bank_conflicts", "shared_ld_requests"]
_OCC_LIMITS = [
    "occupancy_limit_registers",
    "occupancy_limit_shared_mem",
    "occupancy_limit_warps",
    "occupancy_limit_blocks",
]
#: which counter records each case gets; derived quantities (bank-conflict degree, DRAM bandwidth,
#: wavefronts per request) are computed from them when the run is read
#: (analyzers.cases.bench_verdicts), never stored
_ISSUE = ["warp_instructions", "sm_clock"]
CASE_METRICS = {
    "bank.column_read": ["kernel_duration", *_SHARED, *_ISSUE],
    "transpose.tile": [
        "kernel_duration",
        "dram_read_bytes",
        "dram_write_bytes",
        "l2_read_from_l1_bytes",
        *_SHARED,
        "achieved_occupancy",
        *_ISSUE,
    ],
    "tiling.traffic": [
        "kernel_duration",
        "l2_read_from_l1_bytes",
        "dram_read_bytes",
        "dram_write_bytes",
        "achieved_occupancy",
        "theoretical_occupancy",
        "registers_per_thread",
        *_OCC_LIMITS,
        *_SHARED,
        "smem_config_bytes",
        "l1_hit_rate",
        *_ISSUE,
    ],
    "littles_law": [
        "kernel_duration",
        "dram_read_bytes",
        "dram_write_bytes",
        "achieved_occupancy",
        "theoretical_occupancy",
    ],
    "occupancy.sm": [
        "kernel_duration",
        "achieved_occupancy",
        "theoretical_occupancy",
        "registers_per_thread",
        *_OCC_LIMITS,
        "smem_config_bytes",
    ],
}
# (full, quick); others DEFAULT_TIMEOUT_S
TIMEOUT_S = {"bank.column_read": (180, 90), "tiling.traffic": (120, 60)}
DEFAULT_TIMEOUT_S = (100, 60)


# ---------------------------------------------------------------------------------------------
# Pure: counters -> records
# ---------------------------------------------------------------------------------------------


def counter_values(values: dict) -> dict:
    """Record metric -> value (in the record's unit) from one kernel's ncu metric values; None where missing."""
    out = {}
    for rec_metric, (m, _, scale) in COUNTERS.items():
        v = values.get(m)
        out[rec_metric] = None if v is None else float(v) * scale
    return out


def counter_records(case: str, entry: dict, values: dict) -> list[dict]:
    """Records (source "ncu counter") for one profiled kernel: the case's CASE_METRICS that have a value."""
    d = counter_values(values)
    clk = values.get(SM_CLOCK)
    notes = "ncu --clock-control none" + (f"; {entry['notes']}" if entry.get("notes") else "")
    if clk:
        notes += f"; SM clock {float(clk) / 1e6:.0f} MHz"
    out = []
    for metric in CASE_METRICS.get(case, ["kernel_duration"]):
        v = d.get(metric)
        if v is None:
            continue
        out.append(
            make_record(
                case,
                metric,
                v,
                COUNTERS[metric][1],
                entry.get("params", {}),
                source="ncu counter",
                n=1,
                notes=notes,
            )
        )
    return out


def pair_actions(
    actions: list[tuple[str, dict]], entries: list[dict]
) -> tuple[list[tuple[dict, dict]], list[str]]:
    """Pair profiled kernels with manifest lines in launch order; stop at the first name mismatch."""
    pairs, problems = [], []
    if len(actions) != len(entries):
        problems.append(f"{len(actions)} profiled kernels but {len(entries)} manifest launches")
    for (name, values), entry in zip(actions, entries):
        if name != entry["kernel"]:
            problems.append(
                f"profiled {name!r} where the manifest has {entry['kernel']!r}; later "
                f"kernels dropped"
            )
            break
        pairs.append((entry, values))
    return pairs, problems


def parse_raw_csv(text: str) -> list[tuple[str, dict]]:
    """`ncu --import R --page raw --csv --print-units base`: header, units row, one row per kernel."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        raise ValueError("no header row with 'Kernel Name' in ncu's CSV")
    header = rows[start]
    out = []
    for r in rows[start + 2 :]:
        if len(r) != len(header):
            continue
        rec = dict(zip(header, r))
        vals = {}
        for m in METRICS:
            s = rec.get(m, "").replace(",", "").strip()
            try:
                vals[m] = float(s)
            except ValueError:
                vals[m] = None
        out.append((rec["Kernel Name"], vals))
    return out


# ---------------------------------------------------------------------------------------------
# Nsight Compute on this machine
# ---------------------------------------------------------------------------------------------


def find_ncu() -> str | None:
    p = shutil.which("ncu")
    if p:
        return p
    for pat in (
        "/usr/local/cuda/bin/ncu",
        "/opt/nvidia/nsight-compute/*/ncu",
        "/usr/local/cuda/nsight-compute*/ncu",
    ):
        hits = sorted(glob.glob(pat))
        if hits:
            return hits[-1]
    return None


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run(
            [ncu, "--version"], capture_output=True, text=True, errors="replace", timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def _import_ncu_report(ncu: str):
    real = Path(os.path.realpath(ncu)).parent
    cands = [real / "extras" / "python"]
    cands += [
        Path(p)
        for p in sorted(glob.glob(str(real.parent / "nsight-compute*" / "extras" / "python")))
    ]
    cands += [Path(p) for p in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"))]
    for c in cands:
        if (c / "ncu_report.py").is_file():
            if str(c) not in sys.path:
                sys.path.insert(0, str(c))
            break
    import ncu_report  # noqa: PLC0415 - Nsight Compute's own module

    return ncu_report


def read_report(report: Path, ncu: str) -> tuple[list[tuple[str, dict]], str]:
    """(kernel name, {metric: value}) per profiled kernel, in order; and how it was read."""
    try:
        nr = _import_ncu_report(ncu)
        ctx = nr.load_report(str(report))
        out = []
        for i in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(i)
            for j in range(rng.num_actions()):
                act = rng.action_by_idx(j)
                vals = {}
                for m in METRICS:
                    x = act.metric_by_name(m)
                    vals[m] = None if x is None else x.value()
                out.append((act.name(), vals))
        return out, "ncu_report"
    except Exception as e:  # noqa: BLE001 - fall back on ncu's own CSV export
        how = f"CSV export (ncu_report failed: {type(e).__name__}: {e})"
    text = subprocess.run(
        [ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base"],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    ).stdout
    return parse_raw_csv(text), how


# process group of the ncu run in flight (killed by kill_active on SIGTERM)
_ACTIVE: list[int] = []


def kill_active() -> None:
    for pgid in list(_ACTIVE):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


def _run(cmd: list[str], timeout: float, env: dict) -> tuple[int | None, str]:
    """Run in its own process group; on timeout kill the whole group. (returncode or None, output)."""
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    _ACTIVE.append(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    finally:
        _ACTIVE.remove(proc.pid)


def run_stage(
    doc: dict,
    selected: list[str],
    *,
    device: int,
    quick: bool,
    out_dir: Path,
    file_stem: str,
    deadline: float,
    save,
    log=print,
) -> None:
    """Profile each selected NCU case in a child process; append records and failures to `doc`."""
    from collectors.bench.cases import NCU_CASES

    info = doc.setdefault("ncu", {"requested": True, "status": "not run", "reports": []})
    ncu = find_ncu()
    if ncu is None:
        info["status"] = "ncu not found"
        doc["failures"].append(
            {
                "case": "ncu",
                "error": "Nsight Compute (ncu) not found on PATH; counters not collected",
            }
        )
        save()
        return
    info["version"] = ncu_version(ncu)
    rep_dir = out_dir / "ncu"
    rep_dir.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    )
    statuses = []
    for case, prefix in NCU_CASES.items():
        if case not in selected:
            continue
        full_t, quick_t = TIMEOUT_S.get(case, DEFAULT_TIMEOUT_S)
        budget = min(quick_t if quick else full_t, deadline - time.monotonic())
        if budget < 15:
            doc["failures"].append(
                {"case": case, "error": "ncu rerun skipped: suite time budget exhausted"}
            )
            statuses.append("skipped")
            continue
        stem = f"{file_stem}_{case.replace('.', '-')}"
        report = rep_dir / f"{stem}.ncu-rep"
        manifest = rep_dir / f"{stem}.launches.jsonl"
        for p in (report, manifest):
            p.unlink(missing_ok=True)
        cmd = [
            ncu,
            "--clock-control",
            "none",
            "--metrics",
            ",".join(METRICS),
            "--kernel-name",
            f"regex:^{prefix}",
            "-f",
            "-o",
            str(report),
            sys.executable,
            "-m",
            "collectors.bench.run",
            "--ncu-child",
            case,
            "--device",
            str(device),
            "--out",
            str(manifest),
        ] + (["--quick"] if quick else [])
        log(f"  ncu {case}: profiling kernels {prefix}* (limit {budget:.0f} s)")
        t0 = time.monotonic()
        rc, out = _run(cmd, budget, env)
        (rep_dir / f"{stem}.log").write_text(out)
        took = time.monotonic() - t0
        if counters_forbidden(out):
            info["status"] = "counters forbidden (ERR_NVGPUCTRPERM)"
            doc["failures"].append(
                {"case": "ncu", "error": "ERR_NVGPUCTRPERM: " + COUNTER_PERMISSION}
            )
            save()
            log("  ncu: counters forbidden (ERR_NVGPUCTRPERM); stopping the ncu stage")
            return
        tail = " | ".join(out.strip().splitlines()[-3:])
        if rc is None:
            doc["failures"].append(
                {"case": case, "error": f"ncu rerun timed out after {budget:.0f} s ({tail})"}
            )
        elif rc != 0:
            doc["failures"].append({"case": case, "error": f"ncu rerun exited with {rc} ({tail})"})
        n_rec = 0
        if report.is_file() and manifest.is_file():
            try:
                entries = [json.loads(ln) for ln in manifest.read_text().splitlines() if ln.strip()]
                actions, how = read_report(report, ncu)
                pairs, problems = pair_actions(actions, entries)
                for entry, values in pairs:
                    recs = counter_records(case, entry, values)
                    doc["results"].extend(recs)
                    n_rec += len(recs)
                for p in problems:
                    doc["failures"].append({"case": case, "error": f"ncu: {p}"})
                info["reports"].append(
                    {"case": case, "file": report.name, "kernels": len(actions), "read_with": how}
                )
            # any exception: a bad report is a failure of this case's counters only
            except Exception as e:
                doc["failures"].append(
                    {"case": case, "error": f"ncu report unreadable: {type(e).__name__}: {e}"}
                )
        elif rc is not None:
            doc["failures"].append({"case": case, "error": f"ncu wrote no report ({tail})"})
        statuses.append("ok" if n_rec else "failed")
        log(f"  ncu {case}: {n_rec} counter records in {took:.0f} s")
        save()
    info["status"] = (
        "ok"
        if statuses and all(s == "ok" for s in statuses)
        else ("partial" if "ok" in statuses else "failed")
    )
    save()


def child_main(case: str, device: int, manifest: str, quick: bool) -> int:
    """Inside ncu: run one case with every custom kernel launched once, listed in the manifest."""
    from collectors.bench.cases import CASES
    from collectors.bench.context import Context

    ctx = Context(device, quick=quick, ncu_child=True, manifest_path=manifest)
    ctx.begin_case(case)
    CASES[case][0](ctx)
    ctx.sync()
    print(f"ncu child {case}: done; {len(ctx.errors)} errors", flush=True)
    return 1 if ctx.errors else 0
