"""Source-level data of one `.ncu-rep` action, read through NVIDIA's `ncu_report` module (no other
format has it).

More: docs/architecture.md, *collectors.ncu_source*.
"""

from __future__ import annotations

PC_METRICS = ("inst_executed", "smsp__pcsamp_sample_count")

_GETTERS: dict | None = None


def metric_value(met, idx: int | None = None):
    """ncu_report's IMetric.value(idx), without building its table of getters on every call (it did,
    90,000 times for a 9-launch report with Source Counters): the instance's value as str, int or
    float, None where there is none."""
    global _GETTERS
    if _GETTERS is None:
        import ncu_report

        m = ncu_report.IMetric
        none = lambda *args: None  # noqa: E731
        _GETTERS = {
            m.ValueKind_ANY: none,
            m.ValueKind_DOUBLE: m.as_double,
            m.ValueKind_FLOAT: m.as_double,
            m.ValueKind_STRING: m.as_string,
            m.ValueKind_UINT32: m.as_uint64,
            m.ValueKind_UINT64: m.as_uint64,
            m.ValueKind_UNKNOWN: none,
        }
    if idx is None:
        return _GETTERS[met.kind()](met)
    return _GETTERS[met.kind(idx)](met, idx)


def _ids(met) -> list:
    cid = met.correlation_ids()
    return [metric_value(cid, i) for i in range(cid.num_instances())]


def _first_id(met):
    cid = met.correlation_ids()
    return metric_value(cid, 0) if cid.num_instances() else None


def _values(met) -> list[float] | None:
    """The instance values as floats (None for a string-valued metric)."""
    if met.kind(0) == met.ValueKind_STRING:
        return None
    return [met.as_double(i) for i in range(met.num_instances())]


def source_tables(act, text: bool = True) -> tuple[list[dict], list[tuple], dict[str, str]]:
    """(one row per SASS address, the Source Counters as (address, metric, value), the CUDA files). Without
    `text`, the per-address SASS text and source line are left out (None) — reading them is most of a report's
    reading time (9 of 21 s on a 122-launch decode): they are read for one launch when its hot spots are shown
    (read_source_text) — except whether the report has line information at all (`line` of the first address:
    -1 when it has, None when not)."""
    pcs: set[int] = set()
    for name in PC_METRICS:
        met = act.metric_by_name(name)
        if met is not None and met.num_instances() and met.has_correlation_ids():
            pcs.update(x for x in _ids(met) if isinstance(x, int))
    if not pcs:
        return [], [], {}
    rows: list[tuple] = []
    for name in act.metric_names():
        met = act.metric_by_name(name)
        if met is None or not met.num_instances() or not met.has_correlation_ids():
            continue
        first = _first_id(met)
        if not isinstance(first, int) or first not in pcs:
            continue
        ids, vals = _ids(met), _values(met)
        if vals is None or len(ids) != len(vals):
            continue
        rows.extend((int(pc), name, v) for pc, v in zip(ids, vals))
    base = min(pcs)
    sass = []
    if not text:
        info = act.source_info(base)
        has_lines = info is not None and bool(info.file_name())
        sass = [
            {
                "address": pc,
                "offset": pc - base,
                "sass": None,
                "file": None,
                "line": (-1 if has_lines and pc == base else None),
            }
            for pc in sorted(pcs)
        ]
    for pc in sorted(pcs) if text else ():
        info = act.source_info(pc)
        sass.append(
            {
                "address": pc,
                "offset": pc - base,
                "sass": (act.sass_by_pc(pc) or "").strip(),
                "file": info.file_name() if info is not None else None,
                "line": int(info.line()) if info is not None else None,
            }
        )
    try:
        files = {str(k): str(v or "") for k, v in (act.source_files() or {}).items()}
    except Exception:  # noqa: BLE001 - older reports may not answer; the SASS view still works
        files = {}
    return sass, rows, files


def sections_of(act) -> dict[str, str]:
    """metric name -> the name of the first section (by the section's order) that shows it."""
    out: dict[str, str] = {}
    try:
        secs = sorted(act.sections(), key=lambda s: s.order())
    except Exception:  # noqa: BLE001
        return out
    for s in secs:
        for group in (s.header_metrics(), s.body_metrics()):
            for m in group or ():
                try:
                    out.setdefault(m.name(), s.name())
                except Exception:  # noqa: BLE001
                    continue
    return out
