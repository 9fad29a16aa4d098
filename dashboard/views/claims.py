"""Claims: the second seed's ("whitepaper") numbers checked against the GPU registry and the case models.

Rebuilds from the URL: ?verdict=V (repeatable filter) & claim=ID (the claim shown in detail). Measured values
come from `dashboard.data.claim_measurements()` when the store wiring provides it.
"""
from __future__ import annotations

import polars as pl
import streamlit as st

from analyzers.cases import CLAIM_VERDICTS, claims

qp = st.query_params
st.title("Claims")
st.caption("Numbers from a self-described internal “whitepaper” (seed 002), each checked against the GPU registry "
           "and the textbook case models. The verdict is computed, not written down: above-peak, "
           "self-contradictory, unit-error, refuted, plausible or unverifiable.")

def _measured() -> dict:
    """Measured values on the user's GPU for claims that name a microbenchmark: from
    `dashboard.data.claim_measurements() -> {claim_id: Measurement}` when the store wiring provides it."""
    try:
        from dashboard import data
    except Exception:  # noqa: BLE001 - the page must work without the store
        return {}
    fn = getattr(data, "claim_measurements", None)
    return dict(fn()) if fn else {}


cs = claims(measured=_measured())
wanted = [v for v in qp.get_all("verdict") if v in CLAIM_VERDICTS]
chosen = st.multiselect("Verdicts", list(CLAIM_VERDICTS), default=wanted)
if sorted(chosen) != sorted(qp.get_all("verdict")):
    qp["verdict"] = chosen
shown = [c for c in cs if not chosen or c.verdict in chosen]

st.dataframe(pl.DataFrame([{"id": c.id, "verdict": c.verdict, "GPU": c.gpu.replace("NVIDIA ", ""),
                            "claimed": c.claimed, "text": c.gloss, "explanation": c.explanation}
                           for c in shown], schema=["id", "verdict", "GPU", "claimed", "text", "explanation"]),
             hide_index=True, width="stretch")

ids = [c.id for c in shown]
if ids:
    want = qp.get("claim")
    cid = st.selectbox("Details of", ids, index=ids.index(want) if want in ids else 0)
    if qp.get("claim") != cid:
        qp["claim"] = cid
    c = next(x for x in shown if x.id == cid)
    st.subheader(c.id)
    st.markdown(f"> {c.text}\n\n{c.gloss} ({c.where} of seed 002)")
    st.markdown(f"**{c.verdict}** — {c.explanation}")
    if c.measurement:
        st.caption(f"Measurable on your GPU with {c.measurement.kind} `{c.measurement.name}`: {c.measurement.how}.")
    if c.measured_note:
        st.write(c.measured_note)
    if c.details:
        st.dataframe(pl.DataFrame([{k: (str(v) if not isinstance(v, (int, float)) else v) for k, v in d.items()}
                                   for d in c.details]), hide_index=True, width="stretch")
