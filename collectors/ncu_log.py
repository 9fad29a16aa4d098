"""Nsight Compute's console log beside a report: what the report alone cannot say (issue 39). A
report holds the launches ncu finished; the log says how many were asked for (`==PROF== Profiling
"k" - 34 (35/120)`) and which failed (`==ERROR== Failed to profile "k" …`, `==ERROR==
LaunchFailed`). With the log, a report stopped by a time limit says that it holds 35 of the 120
launches asked for, and a failed launch says why.

The log is found beside the report (`partial.ncu-rep.gz` → `partial.log` or `partial.ncu-rep.log`)
when a path is ingested or analysed; its warnings are kept in the run's manifest, so a run
re-derived from its artifact keeps them.
"""

from __future__ import annotations

import re
from pathlib import Path

_PROF = re.compile(
    r'==PROF== Profiling "(?P<name>[^"]*)"(?: - (?P<id>\d+))?(?: '
    r"\((?P<i>\d+)/(?P<n>\d+)\))?"
)
_ERROR = re.compile(r"==ERROR== (?P<msg>.+)")
#: the largest log read (a real log of a few thousand launches is well under this)
MAX_LOG_BYTES = 8 << 20


def parse_ncu_log(text: str) -> dict:
    """{"asked": the launch count ncu was asked for (the n of "(i/n)"), "started": launch ids ncu
    began to profile, "errors": [(launch id or None, message)]: each ==ERROR== line with the launch
    it followed}."""
    asked, started, errors, last = None, [], [], None
    for line in text.splitlines():
        m = _PROF.search(line)
        if m:
            if m.group("n"):
                asked = max(asked or 0, int(m.group("n")))
            if m.group("id") is not None:
                last = int(m.group("id"))
                started.append(last)
            continue
        e = _ERROR.search(line)
        if e:
            errors.append((last, e.group("msg").strip()))
    return {"asked": asked, "started": started, "errors": errors}


def log_warnings(text: str, report_ids: list[int], log_name: str = "the ncu log") -> list[str]:
    """What the log says about this report: fewer launches than asked for, launches begun but not in
    the report, and the errors ncu printed (with the launch each followed)."""
    log = parse_ncu_log(text)
    ids = sorted(i for i in report_ids if i is not None)
    out = []
    if log["asked"] and len(ids) < log["asked"]:
        span = f"ids {ids[0]}–{ids[-1]}" if len(ids) > 1 else (f"id {ids[0]}" if ids else "none")
        out.append(
            f"{log_name} asked for {log['asked']} launches; the report holds {len(ids)} ({span}): "
            "the collection stopped early (a time limit, an interrupt or a crash), so this run is "
            "part of what was asked for"
        )
    missing = [i for i in dict.fromkeys(log["started"]) if i not in set(ids)]
    if missing:
        why = next((m for i, m in log["errors"] if i in missing), None)
        out.append(
            f"launch{'es' if len(missing) > 1 else ''} {', '.join(map(str, missing[:10]))} "
            f"{'were' if len(missing) > 1 else 'was'} begun but "
            f"{'are' if len(missing) > 1 else 'is'} not in the report"
            + (f': ncu said "{why}"' if why else "")
        )
    shown = [(i, m) for i, m in log["errors"] if i not in set(missing)][:3]
    for i, m in shown:
        out.append(
            "ncu reported an error" + (f" at launch {i}" if i is not None else "") + f': "{m}"'
        )
    return out


def sibling_log(path: str | Path) -> Path | None:
    """The console log saved beside a report: the report's name without .gz and its report
    extension, + .log (or the full name + .log). None when there is none."""
    p = Path(path)
    if not p.is_file():
        return None
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    stems = [name + ".log"]
    for ext in (".ncu-rep", ".nsight-cuprof-report", ".csv"):
        if name.endswith(ext):
            stems.insert(0, name[: -len(ext)] + ".log")
    for s in stems:
        c = p.with_name(s)
        if c.is_file() and c.stat().st_size <= MAX_LOG_BYTES:
            return c
    return None
