"""Textbook cases: pick a case of the chapter "Operators and runtime" and a GPU, change its parameters, see the
model's predictions with units, the chapter's own figures, a chart, the same case on other GPUs and — when
measurements exist — measured vs predicted with a verdict.

The page rebuilds from the URL alone: ?case=ID&gpu=NAME&<param>=VALUE…&meas=QUANTITY:VALUE:UNIT (repeatable).
Parameters equal to their default are left out of the URL. Stored measurements come from
`dashboard.data.case_measurements(case_id, gpu_name) -> list[analyzers.cases.Measurement]` when that function
exists (the store wiring); measurements typed on the page are kept in the URL.
"""
from __future__ import annotations

import math

import altair as alt
import polars as pl
import streamlit as st

from analyzers.cases import (CaseError, Measurement, all_cases, compare, evaluate, figure_checks, fmt, get_case,
                             sweep, to_base)
from analyzers.cases.checks import chapter_checks
from analyzers.cases.units import scale_for
from analyzers.gpus import all_gpus, find_gpu

DEFAULT_CASE = "tiling.traffic"
CASES = all_cases()
IDS = [c.id for c in CASES]
ALL_PARAM_NAMES = {p.name for c in CASES for p in c.params}
qp = st.query_params


def _q(v) -> str:
    """A parameter value as written in the URL."""
    if isinstance(v, tuple):
        return ",".join(format(x, ".10g") for x in v)
    if isinstance(v, float):
        return format(v, ".10g")
    return str(v)


def _set_qp(key: str, value: str | None) -> None:
    if value is None:
        if key in qp:
            del qp[key]
    elif qp.get(key) != value:
        qp[key] = value


def _stored_measurements(case_id: str, gpu_name: str) -> list[Measurement]:
    try:
        from dashboard import data
    except Exception:  # noqa: BLE001 - the page must work without the store
        return []
    fn = getattr(data, "case_measurements", None)
    return list(fn(case_id, gpu_name)) if fn else []


def _url_measurements(gpu_name: str) -> tuple[list[Measurement], list[str]]:
    out, bad = [], []
    for item in qp.get_all("meas"):
        parts = item.split(":")
        try:
            key, value, unit = parts[0], float(parts[1]), ":".join(parts[2:])
            to_base(value, unit)
            out.append(Measurement(value, unit, "entered on this page", quantity=key, gpu=gpu_name))
        except (IndexError, ValueError):
            bad.append(item)
    return out, bad


st.title("Textbook cases")
st.caption("The chapter “Operators and runtime” as executable models: every number below is computed from the "
           "parameters and the GPU's spec sheet (analyzers/cases), next to the chapter's own figures.")

# ---- case and GPU -------------------------------------------------------------------------------
wanted = qp.get("case")
if wanted and wanted not in IDS:
    st.warning(f"Unknown case {wanted!r}; showing {DEFAULT_CASE}.")
case_id = st.selectbox("Case", IDS, index=IDS.index(wanted) if wanted in IDS else IDS.index(DEFAULT_CASE),
                       format_func=lambda i: f"{i} — {get_case(i).title}")
case_changed = case_id != qp.get("case")
case = get_case(case_id)
chapter_gpu = case.gpu().name

names = [g.name for g in all_gpus()]
g_wanted = qp.get("gpu")
g_found = find_gpu(g_wanted) if g_wanted else None
if g_wanted and g_found is None:
    st.warning(f"Unknown GPU {g_wanted!r}; showing {chapter_gpu}.")
gpu_name = st.selectbox("GPU", names, index=names.index(g_found.name if g_found else chapter_gpu),
                        format_func=lambda n: n + ("  (the chapter's)" if n == chapter_gpu and case.default_gpu else ""))
gpu = find_gpu(gpu_name)

st.markdown(f"**{case.title}** · {case.section}")
_specs = {"sm_count": ("SMs", ""), "dram_bandwidth_bytes_per_s": ("DRAM", "B/s"),
          "bf16_dense_flop_per_s": ("BF16 dense", "FLOP/s"), "smem_per_sm_bytes": ("smem/SM", "B"),
          "l2_bytes": ("L2", "B")}
st.caption(f"{gpu.name} (CC {gpu.cc[0]}.{gpu.cc[1]}): " + " · ".join(
    f"{label} {fmt(getattr(gpu, f), u) if u else getattr(gpu, f)}" for f, (label, u) in _specs.items()
    if getattr(gpu, f) is not None) + " — registry; sources in the GPUs page / `kernelscope gpus`.")
st.write(case.summary)

# ---- parameters ---------------------------------------------------------------------------------
overrides: dict = {}
changed: dict[str, str] = {}
if case.params:
    st.subheader("Parameters")
    cols = st.columns(4)
    for i, p in enumerate(case.params):
        try:
            default = p.default_for(gpu)
        except CaseError:
            default = p.default
        current = default
        raw = None if case_changed else qp.get(p.name)
        if raw is not None:
            try:
                current = p.parse(raw)
            except CaseError as e:
                st.warning(f"{e} — using the default.")
        label = p.name + (f" [{p.unit}]" if p.unit and p.unit != "count" else "")
        help_ = p.description + ("" if p.from_chapter else " (assumption: the chapter gives no value)") + (
            f" Default: {p.gpu_default_text}." if p.gpu_default else "")
        col = cols[i % 4]
        key = f"case:{case.id}:{p.name}:{gpu.name if p.gpu_default else ''}"
        if p.type == "choice":
            opts = list(p.choices)
            v = col.selectbox(label, opts, index=opts.index(current) if current in opts else 0, help=help_, key=key)
        elif p.type == "floats":
            v = col.text_input(label, value=_q(current), help=help_, key=key)
        elif p.type == "int":
            v = col.number_input(label, value=int(current), step=1, help=help_, key=key)
        else:
            v = col.number_input(label, value=float(current), format="%g", help=help_, key=key)
        overrides[p.name] = v
        if _q(v) != _q(default):
            changed[p.name] = _q(v)

# ---- write the state back to the URL --------------------------------------------------------------
_set_qp("case", case.id)
_set_qp("gpu", None if gpu.name == chapter_gpu else gpu.name)
for name in ALL_PARAM_NAMES:
    _set_qp(name, changed.get(name))
if case_changed and "meas" in qp:
    del qp["meas"]

# ---- predictions --------------------------------------------------------------------------------
if not case.runnable:
    st.info(f"No runnable model: {case.no_model_reason}. The chapter's figures and the reasoning are below.")
    ev = None
else:
    try:
        ev = evaluate(case, gpu, overrides)
    except CaseError as e:
        st.error(str(e))
        st.stop()
    st.subheader(f"Predicted on {gpu.name}")
    st.dataframe(pl.DataFrame([{"quantity": k, "value": p.display, "kind": p.kind, "what": p.label,
                                "formula": p.formula} for k, p in ev.predictions.items()]),
                 hide_index=True, width="stretch")
    for name, rows in ev.tables.items():
        st.caption(name.replace("_", " "))
        st.dataframe(pl.DataFrame(rows), hide_index=True, width="stretch")

    # ---- chart ----------------------------------------------------------------------------------
    rows = sweep(ev)
    if rows:
        unit = rows[0]["unit"]
        div, shown = scale_for(max(abs(r["value"]) for r in rows), unit)
        numeric_x = all(isinstance(r["x"], (int, float)) for r in rows)
        df = pl.DataFrame([{"x": float(r["x"]) if numeric_x else str(r["x"]), "series": r["series"],
                            "value": r["value"] / div} for r in rows])
        ch = case.chart
        x_name = ch.x if ch else "x"
        x_unit = next((p.unit for p in case.params if p.name == x_name), "")
        x_title = f"{x_name} [{x_unit}]" if x_unit and x_unit != "count" else x_name
        y_title = f"value [{shown}]" if shown else "value"
        title = (ch.title if ch else case.title) + f" — {gpu.name}"
        if numeric_x:
            x_enc = alt.X("x:Q", title=x_title, scale=alt.Scale(type="log") if ch and ch.log_x else alt.Undefined)
        else:
            x_enc = alt.X("x:N", title=x_title, sort=None)
        mark = (ch.mark if ch else "bar")
        base = alt.Chart(df)
        if mark == "bar":
            layer = base.mark_bar().encode(x=x_enc, y=alt.Y("value:Q", title=y_title),
                                           color=alt.Color("series:N", title=None),
                                           xOffset="series:N" if df["series"].n_unique() > 1 else alt.Undefined)
        else:
            layer = base.mark_line(point=True).encode(x=x_enc, y=alt.Y("value:Q", title=y_title),
                                                      color=alt.Color("series:N", title=None))
        layer = layer.encode(tooltip=[alt.Tooltip("series:N"), alt.Tooltip("x", title=x_title),
                                      alt.Tooltip("value:Q", format=".4g", title=y_title)])
        chart = layer
        if ch and numeric_x and isinstance(ev.params.get(ch.x), (int, float)):
            rule = alt.Chart(pl.DataFrame({"x": [float(ev.params[ch.x])]})).mark_rule(
                strokeDash=[4, 4], color="#6b7280").encode(x="x:Q")
            chart = alt.layer(layer, rule)
        st.altair_chart(chart.properties(title=title, height=320), width="stretch", theme=None)

    # ---- the same case on other GPUs ------------------------------------------------------------
    with st.expander("Same parameters on every GPU of the registry"):
        fixed = {k: v for k, v in overrides.items()
                 if not case.param(k).gpu_default or k in changed}
        evs = {}
        for g in all_gpus():
            try:
                evs[g.name] = evaluate(case, g, fixed)
            except CaseError as e:
                evs[g.name] = str(e)
        keys = [k for k, p in ev.predictions.items()
                if len({(e.predictions[k].display if not isinstance(e, str) else e) for e in evs.values()}) > 1]
        if keys:
            st.dataframe(pl.DataFrame([{"GPU": n, **({k: e.predictions[k].display for k in keys}
                                                     if not isinstance(e, str) else {keys[0]: e})}
                                       for n, e in evs.items()]), hide_index=True, width="stretch")
        else:
            st.write("None of this case's predictions depend on the GPU.")

# ---- the chapter's figures ------------------------------------------------------------------------
if case.figures:
    st.subheader("The chapter's figures")
    checks = {id(c.figure): c for c in figure_checks(case.id)}
    st.dataframe(pl.DataFrame([{
        "figure": f.text, "quoted for": (f.gpu or "—").replace("NVIDIA ", ""),
        "kind": "measured" if f.measured else "computed",
        "model": checks[id(f)].to_json()["model_display"] if id(f) in checks else "—",
        "check": checks[id(f)].verdict.kind if id(f) in checks else "(no model)",
        "explanation": checks[id(f)].verdict.explanation if id(f) in checks else "",
        "source": f.source} for f in case.figures]), hide_index=True, width="stretch")
own = chapter_checks(case.id)
if own:
    with st.expander("Consistency checks on the chapter", expanded=True):
        for c in own:
            st.markdown(f"**{c.verdict}** — {c.title}: {c.explanation}")

# ---- measured vs predicted ------------------------------------------------------------------------
st.subheader("Measured vs predicted")
if case.measurements:
    st.caption("Measurements that can confirm this case: " + "; ".join(
        f"{m.kind} `{m.name}`" + (f" → {m.quantity}" if m.quantity else "") for m in case.measurements))
if ev is not None:
    stored = _stored_measurements(case.id, gpu.name)
    typed, bad = _url_measurements(gpu.name)
    for b in bad:
        st.warning(f"Ignored measurement {b!r} in the URL (expected QUANTITY:VALUE:UNIT).")
    comps, errors = [], []
    for m in stored + typed:
        try:
            comps += compare(ev, [m])
        except (KeyError, ValueError) as e:
            errors.append(f"{m.quantity} = {m.value} {m.unit}: {e.args[0] if e.args else e}")
    for e in errors:
        st.warning(e)
    if comps:
        st.dataframe(pl.DataFrame([{
            "quantity": c.quantity, "predicted": c.prediction.display,
            "measured": c.to_json()["measured_display"], "source": c.measurement.source,
            "verdict": c.verdict.kind, "explanation": c.verdict.explanation} for c in comps]),
            hide_index=True, width="stretch")
    else:
        st.write("No measurements for this case and GPU yet.")
    numeric = [k for k, p in ev.predictions.items() if p.numeric and p.kind != "info"]
    if numeric:
        with st.form("add_measurement"):
            c1, c2, c3 = st.columns(3)
            qty = c1.selectbox("quantity", numeric)
            val = c2.number_input("measured value", value=0.0, format="%g")
            unit = c3.text_input("unit", value=ev.predictions[numeric[0]].unit,
                                 help="e.g. ms, µs, MiB, GB/s, %, count")
            if st.form_submit_button("Compare"):
                try:
                    to_base(val, unit)
                except ValueError as e:
                    st.error(str(e))
                else:
                    qp["meas"] = qp.get_all("meas") + [f"{qty}:{val:g}:{unit}"]
                    st.rerun()
