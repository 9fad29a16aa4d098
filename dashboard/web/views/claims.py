"""Claims: the second seed's ("whitepaper") numbers checked against the GPU registry and the case
models.

Rebuilds from the URL: ?verdict=V (repeatable filter) & claim=ID (the claim shown in detail). Claims
that name a `kernelscope bench` ceiling show the store's measured value (Source.claim_measurements).
The blocks are built by `dashboard.web.reports.claims` (claims_table, claim_detail), which the HTML
export uses too.
"""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import claims as pages
from dashboard.web.reports.report_blocks import Report

qp = st.query_params
st.title("Claims")
st.caption(pages.CLAIMS_INTRO)


cs = pages.checked_claims(store_access.source())
wanted = pages.claim_verdicts(qp.get_all("verdict"))
chosen = st.multiselect("Verdicts", pages.verdict_kinds(), default=wanted)
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
widgets.share_panel("claims", {"verdict": chosen, "claim": cid}, [rep])
