"""Claims: the second seed's ("whitepaper") numbers checked against the GPU registry and the case models.

Rebuilds from the URL: ?verdict=V (repeatable filter) & claim=ID (the claim shown in detail). Measured values
come from `dashboard.data.claim_measurements()` when the store wiring provides it. The blocks are built by
`dashboard.pages` (claims_table, claim_detail), which the HTML export uses too.
"""
from __future__ import annotations

import streamlit as st

from analyzers.cases import CLAIM_VERDICTS, claims
from dashboard import pages, ui
from dashboard.report import Report, render_streamlit

qp = st.query_params
st.title("Claims")
st.caption(pages.CLAIMS_INTRO)


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
wanted = pages.claim_verdicts(qp.get_all("verdict"))
chosen = st.multiselect("Verdicts", list(CLAIM_VERDICTS), default=wanted)
if sorted(chosen) != sorted(qp.get_all("verdict")):
    qp["verdict"] = chosen
shown = [c for c in cs if not chosen or c.verdict in chosen]
table = pages.claims_table(shown, len(cs), chosen)
render_streamlit([table])
rep = Report("Claims", [table], subtitle=pages.CLAIMS_INTRO)

ids = [c.id for c in shown]
cid = None
if ids:
    want = qp.get("claim")
    cid = st.selectbox("Details of", ids, index=ids.index(want) if want in ids else 0)
    if qp.get("claim") != cid:
        qp["claim"] = cid
    detail = pages.claim_detail(next(x for x in shown if x.id == cid))
    render_streamlit(detail)
    rep.add(*detail)
ui.share_panel("claims", {"verdict": chosen, "claim": cid}, [rep])
