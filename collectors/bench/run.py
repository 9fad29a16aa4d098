"""Entry point of the GPU microbenchmark suite.

    python3 -m collectors.bench.run --out DIR [--ncu] [--device N] [--cases a,b] [--quick]

writes DIR/bench_<gpu-slug>_<uuid8>.json, rewritten after every case (a run cut short still leaves
its results; "finished" stays null until the end), and with --ncu the Nsight Compute reports under
DIR/ncu/. Every case runs in its own try/except under a time limit; its failure is recorded and the
suite goes on. Progress lines go to stdout (run with PYTHONUNBUFFERED=1 or -u).
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import secrets
import signal
import sys
import tempfile
import time
from pathlib import Path

from collectors.bench import harness

# The main cases must start before this many seconds; the ncu reruns must end before the second.
BUDGET_S = {False: (270.0, 400.0), True: (150.0, 320.0)}  # full, quick
#: what the suite measures: 2 adds the tensor-core tiling, equal-block transposes, the C++ launch
#: floor, one kernel between events, the host memcpy of the staging path and explicit staged copies
#: (issue 12)
SUITE_VERSION = 2


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(o):
    """JSON-safe copy: non-finite floats -> None, numpy scalars -> Python numbers."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        o = o.item()
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return None
    return o


def write_doc(doc: dict, path: Path) -> None:
    """Atomic rewrite: a reader (or a timeout) never sees half a document."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_clean(doc), indent=1, allow_nan=False))
    os.replace(tmp, path)


def host_info() -> dict:
    """The host the suite runs on: its host-side ceilings (launch submit, host memcpy, the host
    link) belong to it, not to the GPU model (analyzers.ceilings.HOST_RESOURCES). id: a hash of the
    host name and CPU model."""
    import hashlib

    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    name = platform.node()
    return {
        "name": name,
        "cpu": cpu or platform.processor(),
        "cpus": os.cpu_count(),
        "id": hashlib.sha256(f"{name}|{cpu}".encode()).hexdigest()[:12],
    }


def versions(ncu: bool) -> dict:
    v = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("torch", "triton", "cupy", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001 - a missing package is recorded, not fatal here
            v[mod] = f"unavailable: {type(e).__name__}"
    try:
        import torch

        v["cuda_torch_built_with"] = torch.version.cuda
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    try:
        import cupy

        v["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        v["cuda_driver_api"] = cupy.cuda.runtime.driverGetVersion()
        v["nvrtc"] = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    except Exception:  # noqa: BLE001
        pass
    try:
        import pynvml as nv

        nv.nvmlInit()
        d = nv.nvmlSystemGetDriverVersion()
        v["driver"] = d.decode() if isinstance(d, bytes) else d
    except Exception:  # noqa: BLE001
        pass
    if ncu:
        from collectors.bench.ncu_rerun import find_ncu, ncu_version

        p = find_ncu()
        v["ncu"] = ncu_version(p) if p else None
    return v


def _nvml_handle(props):
    """NVML handle of the torch device (matched by PCI domain/bus/device), or None."""
    try:
        import pynvml as nv

        nv.nvmlInit()
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            pci = nv.nvmlDeviceGetPciInfo(h)
            if (pci.domain, pci.bus, pci.device) == (
                props.pci_domain_id,
                props.pci_bus_id,
                props.pci_device_id,
            ):
                return i, h
    except Exception:  # noqa: BLE001 - clocks are then not sampled; said in the document
        pass
    return None, None


def gpu_info(ctx) -> tuple[dict, object, float | None]:
    """The document's "gpu" object, the NVML handle and the max SM clock (MHz)."""
    p = ctx.props
    info = {
        "name": p.name,
        "index": ctx.device,
        "uuid": None,
        "cc": [p.major, p.minor],
        "sm_count": p.multi_processor_count,
        "l2_bytes": p.L2_cache_size,
        "memory_bytes": p.total_memory,
        "properties": ctx.cuda_props,
        "attributes": ctx.attributes,
    }
    idx, h = _nvml_handle(p)
    max_clk = None
    if h is not None:
        import pynvml as nv

        def q(f, *a):
            try:
                r = f(h, *a)
                return r.decode() if isinstance(r, bytes) else r
            except Exception:  # noqa: BLE001
                return None

        max_clk = q(nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_SM)
        pl = q(nv.nvmlDeviceGetPowerManagementLimit)
        info.update(
            nvml_index=idx,
            uuid=q(nv.nvmlDeviceGetUUID),
            max_sm_clock_mhz=max_clk,
            max_mem_clock_mhz=q(nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_MEM),
            power_limit_w=pl / 1000 if pl else None,
            pcie_max_gen=q(nv.nvmlDeviceGetMaxPcieLinkGeneration),
            pcie_max_width=q(nv.nvmlDeviceGetMaxPcieLinkWidth),
            pci_bus_id=q(lambda hh: nv.nvmlDeviceGetPciInfo(hh).busId),
        )
    if not info["uuid"]:
        try:
            info["uuid"] = "GPU-" + str(p.uuid)
        except Exception:  # noqa: BLE001
            info["uuid"] = None
    return info, h, max_clk


def _on_alarm(signum, frame):
    raise harness.CaseTimeout()


def _cold_caches() -> None:
    """Empty Triton and Inductor caches of this run's own (unless the caller chose them), removed
    at exit, the ncu children that share them included."""
    import atexit
    import shutil

    made = []
    for var, prefix in (
        ("TRITON_CACHE_DIR", "ks-triton-"),
        ("TORCHINDUCTOR_CACHE_DIR", "ks-inductor-"),
    ):
        if not os.environ.get(var):
            os.environ[var] = tempfile.mkdtemp(prefix=prefix)
            made.append(os.environ[var])
    atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in made])


def _on_term(signum, frame):
    """Killed from outside (e.g. `timeout`): end the ncu child too, then exit; the document on disk
    holds every case finished so far."""
    from collectors.bench.ncu_rerun import kill_active

    kill_active()
    raise SystemExit(128 + signum)


def run_case(ctx, case_id: str, fn, limit_s: float, doc: dict, handle, max_clk) -> str:
    """Run one case under a SIGALRM time limit with NVML sampling; file its records and failures."""
    ctx.begin_case(case_id)
    t0 = time.monotonic()
    error = None
    sampler = harness.NvmlSampler(handle, max_sm_clock_mhz=max_clk)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s, 2.0)  # fires again every 2 s until cleared
    try:
        with sampler:
            fn(ctx)
            ctx.sync()
    except harness.CaseTimeout:
        error = f"timed out after {limit_s:.0f} s (results measured before that are kept)"
    except Exception as e:  # noqa: BLE001 - a failing case is reported and the suite goes on
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        error = f"{type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    nvml = sampler.summary()
    recs = ctx.records
    if nvml and nvml["throttled"]:
        for r in recs:
            r["flags"] = sorted(set(r.get("flags", [])) | {"throttled"})
    for r in recs:
        (doc["ceilings"] if r["case"] == "ceiling" else doc["results"]).append(r)
    for msg in ctx.errors:
        doc["failures"].append({"case": case_id, "error": msg})
    if error:
        doc["failures"].append({"case": case_id, "error": error})
    status = "failed" if (error and not recs) else ("partial" if (error or ctx.errors) else "ok")
    doc["cases"][case_id] = {
        "status": status,
        "seconds": round(time.monotonic() - t0, 3),
        "records": len(recs),
        "nvml": nvml,
        "checks": dict(ctx.checks),
    }
    return status if not error else f"{status}: {error}"


def _cleanup(ctx) -> str | None:
    """Free the case's memory; return an error if the CUDA context no longer works."""
    ctx.begin_case("")
    gc.collect()
    try:
        ctx.torch.cuda.synchronize()
        ctx.torch.cuda.empty_cache()
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def _headline(recs: list[dict]) -> str:
    parts = []
    for r in recs[:3]:
        parts.append(f"{r['metric']}={r['value']:.4g} {r['unit']}")
    return ", ".join(parts)


def _run_cases(
    ctx, selected, doc, save, log, start, case_budget, quick, handle, max_clk
) -> str | None:
    """Every selected case in order; returns why the CUDA context died, if it did."""
    from collectors.bench.cases import CASES

    dead = None
    for i, case_id in enumerate(selected, 1):
        if dead:
            doc["failures"].append(
                {"case": case_id, "error": f"skipped: the CUDA context failed ({dead})"}
            )
            continue
        if time.monotonic() - start > case_budget:
            doc["failures"].append(
                {
                    "case": case_id,
                    "error": f"skipped: suite time budget ({case_budget:.0f} s) exhausted",
                }
            )
            log(f"({i}/{len(selected)}) {case_id}: skipped, time budget exhausted")
            continue
        fn, full_limit, quick_limit = CASES[case_id]
        log(f"({i}/{len(selected)}) {case_id} ...")
        try:
            status = run_case(
                ctx, case_id, fn, quick_limit if quick else full_limit, doc, handle, max_clk
            )
        except (
            harness.CaseTimeout
        ):  # a repeat of the alarm that slipped past run_case's own handler
            signal.setitimer(signal.ITIMER_REAL, 0)
            doc["failures"].append({"case": case_id, "error": "timed out"})
            doc["cases"].setdefault(
                case_id,
                {"status": "failed", "seconds": 0.0, "records": 0, "nvml": None, "checks": {}},
            )
            status = "failed: timed out"
        new = list(ctx.records)
        info = doc["cases"][case_id]
        nv = info.get("nvml") or {}
        log(
            f"({i}/{len(selected)}) {case_id}: {status}; {info['records']} records in "
            f"{info['seconds']:.1f} "
            f"s{'; THROTTLED ' + ','.join(nv['throttle_reasons']) if nv.get('throttled') else ''}{'; ' + _headline(new) if new else ''}"
        )
        dead = _cleanup(ctx)
        if dead:
            log(f"CUDA context failed after {case_id}: {dead}; the remaining cases are skipped")
        save()
    return dead


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m collectors.bench.run", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--out", required=True, help="output folder (a manifest path for --ncu-child)")
    ap.add_argument(
        "--ncu", action="store_true", help="rerun the custom kernels under Nsight Compute"
    )
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (PCI bus order)")
    ap.add_argument(
        "--cases", default=None, help="comma list of case ids or prefixes (default: all)"
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions (smoke test)")
    ap.add_argument("--ncu-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

    if args.ncu_child:
        from collectors.bench.ncu_rerun import child_main

        return child_main(args.ncu_child, args.device, args.out, args.quick)

    signal.signal(signal.SIGTERM, _on_term)
    # cold compile caches, so compile.amortization measures a real first compile; removed when the
    # run ends (they are the run's alone, and an inductor cache grows to hundreds of MB)
    _cold_caches()
    # inductor compiles in this process: a pool of compile workers left running in the background
    # would steal CPU from the host-bound timings that follow (eager FFN launches: cv 14-35 % on the
    # H200 run)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    start = time.monotonic()
    case_budget, ncu_budget = BUDGET_S[args.quick]

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - start:6.1f}s] {msg}", flush=True)

    from collectors.bench.cases import select_cases
    from collectors.bench.context import Context

    try:
        selected = select_cases(args.cases)
    except ValueError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"starting: device {args.device}, {'quick' if args.quick else 'full'} run, {len(selected)} "
        f"cases{', then ncu reruns' if args.ncu else ''}"
    )
    ctx = Context(args.device, quick=args.quick, log=log)
    seed = secrets.randbits(31)
    ctx.torch.manual_seed(seed)
    gpu, handle, max_clk = gpu_info(ctx)
    path = out_dir / harness.result_file_name(gpu["name"], gpu["uuid"])
    doc = {
        "kernelscope_bench": 1,
        "suite": SUITE_VERSION,
        "gpu": gpu,
        "host": host_info(),
        "versions": versions(args.ncu),
        "started": _now(),
        "finished": None,
        "options": {"quick": args.quick, "ncu": args.ncu, "cases": selected, "seed": seed},
        "ceilings": [],
        "results": [],
        "failures": [],
        "cases": {},
    }
    save = lambda: write_doc(doc, path)  # noqa: E731
    save()
    log(
        f"{gpu['name']} ({gpu['uuid']}), {gpu['sm_count']} SMs, L2 {gpu['l2_bytes'] / 2**20:.0f} "
        f"MiB -> {path}"
    )
    try:
        dead = _run_cases(
            ctx, selected, doc, save, log, start, case_budget, args.quick, handle, max_clk
        )
        if args.ncu and not dead:
            from collectors.bench.cases import NCU_CASES
            from collectors.bench.ncu_rerun import run_stage

            log("ncu reruns ...")
            ctx.torch.cuda.empty_cache()
            run_stage(
                doc,
                [c for c in selected if c in NCU_CASES],
                device=args.device,
                quick=args.quick,
                out_dir=out_dir,
                file_stem=path.stem,
                deadline=start + ncu_budget,
                save=save,
                log=log,
            )
    finally:
        # also when stopped from outside (SIGTERM -> SystemExit): "finished" then stays null
        save()
    doc["finished"] = _now()
    save()
    _summary(doc, log)
    log(f"wrote {path}")
    return 0


HEADLINES = {
    ("bank.column_read", "time_ratio_unpadded_padded"),
    ("bank.column_read", "bank_conflict_degree"),
    ("tiling.traffic", "time"),
    ("tiling.traffic", "l2_read_from_l1_bytes"),
    ("transpose.tile", "time"),
    ("launch.overhead", "back_to_back_time_per_launch"),
    ("h2d.chunked_copy", "staged_copy_time"),
    ("flash.attention_traffic", "extra_peak_memory"),
    ("graph.replay", "time_per_ffn"),
}


def _summary(doc: dict, log) -> None:
    log(
        "ceilings (measured; `kernelscope analyze` of the result compares them with the spec "
        "sheet):"
    )
    for r in doc["ceilings"]:
        log(
            f"  {r['metric']:<26} {r['value']:>12.4g} {r['unit']:<7}  "
            f"cv={r['cv'] if r['cv'] is None else round(r['cv'], 4)}"
            f"  {r['params'].get('method', '')}"
        )
    for r in doc["results"]:
        if (r["case"], r["metric"]) in HEADLINES:
            p = {
                k: v
                for k, v in r["params"].items()
                if k
                in (
                    "kernel",
                    "width_bytes",
                    "stride_words",
                    "strides",
                    "backend",
                    "length",
                    "mode",
                    "activation",
                )
            }
            if r["metric"] == "bank_conflict_degree" and p.get("stride_words") not in (
                1,
                2,
                16,
                32,
                33,
                34,
                36,
            ):
                continue
            log(f"  {r['case']} {r['metric']} {p}: {r['value']:.4g} {r['unit']} ({r['source']})")
    noisy = sum("noisy" in r.get("flags", []) for r in doc["results"])
    log(f"results: {len(doc['results'])} records ({noisy} noisy); failures: {len(doc['failures'])}")
    for f in doc["failures"]:
        log(f"  FAILED {f['case']}: {f['error']}")


if __name__ == "__main__":
    sys.exit(main())
