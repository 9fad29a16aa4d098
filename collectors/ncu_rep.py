"""Reading an `.ncu-rep` with NVIDIA's `ncu_report` module, and ncu's units: what the sandbox's
child process runs.

This module imports neither polars nor the CSV parser, so the child that reads a report
(collectors.sandbox, task "ncu-rep") starts in a fraction of a second; collectors.ncu builds the
tables from what it returns.

    read_report_file(path, name) -> {"launches": [(identity, {metric: (value, text, unit)})],  one per launch
                                     "sections": {metric: the first section showing it},
                                     "source": {"sass": [...], "metrics": [...], "files": {...}}}  (collectors.ncu_source)
    ncu_to_base(value, unit) -> (value in base units, base unit)
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import math
import re

from collectors import progress
from collectors.errors import ArtifactError

_SI = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "K": 1e3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}
_TIME_TO_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_TIME_TO_S = {k: v * 1e-9 for k, v in _TIME_TO_NS.items()}


def _scale_term(term: str, denominator: bool) -> tuple[float, str]:
    """Factor and base unit of one unit term (numerator: time -> ns; denominator: time -> s)."""
    if term in _TIME_TO_NS:
        return (_TIME_TO_S[term], "s") if denominator else (_TIME_TO_NS[term], "ns")
    m = re.fullmatch(r"([numKkMGTP]?)(byte|hz|Hz)", term)
    if m:
        base = "byte" if m.group(2) == "byte" else "hz"
        return _SI[m.group(1)], base
    return 1.0, term


def ncu_to_base(value: float, unit: str) -> tuple[float, str]:
    """Convert an ncu value with its (possibly auto-scaled) unit to base units.

    `Kbyte` = 1,000 bytes (ncu uses SI prefixes: a 32 KiB carve-out prints as 32.768 Kbyte); times
    become ns, rates per second, frequencies hz: `Kbyte/block` -> byte/block, `sector/us` ->
    sector/s.
    """
    unit = (unit or "").strip()
    if not unit:
        return value, ""
    num, _, den = unit.partition("/")
    f_num, b_num = _scale_term(num, denominator=False)
    if not den:
        return value * f_num, b_num
    f_den, b_den = _scale_term(den, denominator=True)
    return value * f_num / f_den, f"{b_num}/{b_den}"


def read_report_file(path: str, name: str, source_text: bool = False) -> dict:
    """Read an .ncu-rep file with NVIDIA's `ncu_report` module (in the sandbox's child process: it
    can abort): each launch's identity and metrics, the section that shows each metric, and the
    source level (the Source Counters per address, the CUDA files the report holds; the SASS text and
    source line of each address only with `source_text`: `read_source_text_file` reads them for one
    launch when it is shown)."""
    from collectors.ncu_source import metric_value, sections_of, source_tables

    try:
        import ncu_report  # NVIDIA's wheel `ncu-report`: pip install 'kernelscope[ncu]'
    except ImportError:
        raise ArtifactError(
            name,
            "reading .ncu-rep needs NVIDIA's ncu-report wheel: pip install 'kernelscope[ncu]' (or "
            "export a CSV: ncu --import FILE --page raw --csv > FILE.csv)",
        ) from None
    try:
        ctx = ncu_report.load_report(path)
    except Exception as e:  # noqa: BLE001 - the wheel raises plain exceptions for corrupt files
        raise ArtifactError(name, f"not a readable Nsight Compute report ({e})") from None
    out = []
    sections: dict[str, str] = {}
    source: dict = {"sass": [], "metrics": [], "files": {}}
    total = sum(ctx.range_by_idx(ri).num_actions() for ri in range(ctx.num_ranges()))
    done = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            act = rng.action_by_idx(ai)
            done += 1
            progress.report("reading launch", done, total)
            for m, sec in sections_of(act).items():
                sections.setdefault(m, sec)
            metrics = {}
            for m in act.metric_names():
                met = act.metric_by_name(m)
                if met is None or met.num_instances() > 1 and not met.has_value():
                    continue
                v = metric_value(met)
                unit = met.unit() or ""
                if isinstance(v, str):
                    metrics[m] = (None, v, unit)
                elif v is None:
                    metrics[m] = (None, None, unit)
                elif not math.isfinite(float(v)):  # e.g. a duration of an incomplete collection
                    metrics[m] = (None, None, unit)
                else:
                    fv, u = ncu_to_base(float(v), unit)
                    metrics[m] = (fv, None, u)

            def num(m: str):
                t = metrics.get(m)
                return None if t is None or t[0] is None else t[0]

            bx, by, bz = (num(f"launch__block_dim_{c}") for c in "xyz")
            gx, gy, gz = (num(f"launch__grid_dim_{c}") for c in "xyz")
            ccmaj, ccmin = (
                num("device__attribute_compute_capability_major"),
                num("device__attribute_compute_capability_minor"),
            )
            ident = {
                "ID": str(len(out)),
                "Process ID": "",
                "Process Name": "",
                "Host Name": "",
                "Kernel Name": act.name(ncu_report.IAction.NameBase_DEMANGLED)
                if hasattr(ncu_report, "IAction")
                else act.name(),
                "Context": _fmt_int(num("launch__context_id")),
                "Stream": _fmt_int(num("launch__stream_id")),
                "Block Size": f"({_fmt_int(bx)}, {_fmt_int(by)}, {_fmt_int(bz)})",
                "Grid Size": f"({_fmt_int(gx)}, {_fmt_int(gy)}, {_fmt_int(gz)})",
                "Device": _fmt_int(
                    num("launch__device_id") or num("device__attribute_device_index")
                ),
                "CC": f"{_fmt_int(ccmaj)}.{_fmt_int(ccmin)}" if ccmaj is not None else "",
                "NVTX": _nvtx_of(act),
            }
            kid = len(out)
            out.append((ident, metrics))
            sass, rows, files = source_tables(act, text=source_text)
            source["sass"] += [{"id": kid, **r} for r in sass]
            source["metrics"] += [(kid, *r) for r in rows]
            for f, content in files.items():
                if content or f not in source["files"]:
                    source["files"][f] = content
    if not out:
        raise ArtifactError(name, "the report holds no profiled kernels")
    return {"launches": out, "sections": sections, "source": source}


def read_source_text_file(path: str, name: str, launch_id: str) -> dict:
    """The SASS text and source line of every address of one launch (its position in the report, as
    read_report_file numbers them), and the CUDA files: {"sass": [...], "files": {...}}."""
    from collectors.ncu_source import source_tables

    import ncu_report

    try:
        ctx = ncu_report.load_report(path)
    except Exception as e:  # noqa: BLE001 - the wheel raises plain exceptions for corrupt files
        raise ArtifactError(name, f"not a readable Nsight Compute report ({e})") from None
    want, kid = int(launch_id), 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        if kid + rng.num_actions() <= want:
            kid += rng.num_actions()
            continue
        sass, _, files = source_tables(rng.action_by_idx(want - kid), text=True)
        return {"sass": [{"id": want, **r} for r in sass], "files": files}
    raise ArtifactError(name, f"the report has no launch {want}")


def _nvtx_of(act) -> str | None:
    """The NVTX ranges a launch was profiled in (ncu --nvtx): push/pop ranges as "outer/inner/",
    start/end ranges by name, "domain@" in front for a non-default domain; None without NVTX data."""
    try:
        st = act.nvtx_state()
    except Exception:  # noqa: BLE001 - reports without NVTX support
        return None
    if st is None:
        return None
    parts = []
    for d in st.domains():
        dom = st.domain_by_id(d)
        name = dom.name()
        pre = "" if name in (None, "", "<default domain>") else f"{name}@"
        pp = [str(x) for x in (dom.push_pop_ranges() or ())]
        if pp:
            parts.append(pre + "/".join(pp) + "/")
        parts += [pre + str(x) for x in (dom.start_end_ranges() or ())]
    return "; ".join(parts) or None


def _fmt_int(v) -> str:
    return "" if v is None or v != v or v in (float("inf"), float("-inf")) else str(int(v))
