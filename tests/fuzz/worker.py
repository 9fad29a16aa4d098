"""The fuzzing harness's worker: reads one task per line on stdin, runs the commands and page builds
of tests.fuzz.oracle on it, writes one JSON result per line on its original stdout.

Everything the commands print goes through `contextlib.redirect_*` into strings; file descriptors 1
and 2 are pointed at a log file, so a stray C-level write is kept as `noise` in the result instead
of corrupting the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main(log_path: str) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    from tests.fuzz.oracle import absurdities, run_command
    import dashboard.cli  # noqa: F401  warm
    import dashboard.web.reports  # noqa: F401
    from dashboard.web import render_html

    render_html.vega_bundle()
    for line in sys.stdin:
        task = json.loads(line)
        os.ftruncate(log_fd, 0)
        os.lseek(log_fd, 0, os.SEEK_SET)
        try:
            res = run_task(task, run_command, absurdities)
        except BaseException:  # noqa: BLE001 - the harness reports it
            res = {"harness_error": traceback.format_exc()}
        try:
            noise = open(log_path, encoding="utf-8", errors="replace").read()
        except OSError:
            noise = ""
        res["noise"] = noise[-2000:]
        proto.write(json.dumps(res, default=str) + "\n")
    return 0


def run_task(task: dict, run, absurdities) -> dict:
    path, store = task["path"], task["store"]
    cmds = [run(["ingest", path, "--store", store])]
    res: dict = {"commands": cmds, "pages": [], "absurd": []}
    if cmds[0]["rc"] != 0:
        cmds.append(run(["analyze", path, "--store", store, "--format", "json"]))
        return res
    fields = cmds[0]["stdout"].split("\t")
    rid, kind = fields[0].strip(), (fields[1].strip() if len(fields) > 1 else "")
    res["run_id"], res["kind"] = rid, kind
    for argv in (
        ["analyze", rid, "--format", "json"],
        ["analyze", path, "--format", "json"],
        ["analyze", rid],
        ["runs", "--format", "json"],
        ["gpus", "--format", "json"],
        ["ceilings", "--format", "json"],
    ):
        cmds.append(run([*argv, "--store", store]))
    if kind in ("kineto", "nsys"):
        cmds.append(run(["whatif", path, "--kernel", ".", "--speedup", "2", "--format", "json"]))
        cmds.append(run(["analyze", rid, "--compat", "hta", "--format", "json", "--store", store]))
    html = os.path.join(os.path.dirname(path), "export.html")
    cmds.append(run(["export", rid, "--html", html, "--store", store]))
    other = task.get("other") or {}
    if kind == "ncu" and other.get("kineto"):
        cmds.append(run(["join", rid, other["kineto"], "--format", "json", "--store", store]))
    if kind in ("kineto", "nsys") and other.get("ncu"):
        cmds.append(run(["join", other["ncu"], rid, "--format", "json", "--store", store]))
    for c in cmds[1:3]:
        if c["rc"] == 0:
            try:
                res["absurd"] += absurdities(kind, json.loads(c["stdout"]))
            except ValueError:
                res["absurd"].append(f"{c['argv'][:2]}: stdout is not one JSON document")
    if task.get("pages"):
        res["pages"] = pages(store, rid, kind, task.get("other") or {})
    return res


#: store path -> the Source its pages are built with
_SOURCES: dict = {}


def pages(store: str, rid: str, kind: str, other: dict) -> list[str]:
    """Every page the run appears on, built as the dashboard builds it (and exported to HTML); their exceptions."""
    from collectors.store import Store
    from dashboard.web.reports import build
    from dashboard.web.render_html import render_html
    from dashboard.core.source import Source

    # one Source per store for the worker's life, as the dashboard's server keeps one across
    # requests: the other runs' analyses stay cached, a new run is read from the store's listing
    src = _SOURCES.get(store)
    if src is None:
        src = _SOURCES[store] = Source(Store(store))
    base = other.get(kind) or next(iter(other.values()), rid)
    own = {"ncu": "kernels", "kineto": "timeline", "nsys": "timeline", "bench": "gpus"}.get(
        kind, "runs"
    )
    todo = [
        ("home", {}),
        ("runs", {}),
        ("gpus", {}),
        ("claims", {}),
        (own, {"run": rid}),
        ("compare", {"a": base, "b": rid}),
    ]
    if kind == "ncu":
        todo.append(("kernels", {"run": rid, "kernel": "0", "q": "dram"}))
    errors = []
    for page, params in todo:
        try:
            rep = build(src, page, params)
            if page in ("kernels", "timeline", "compare"):
                render_html([rep], source=page)
        except Exception:  # noqa: BLE001 - what a page would show as an error
            tb = traceback.format_exc().strip().splitlines()
            errors.append(f"{page} {params}: {' | '.join(tb[-3:])}")
    return errors


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
