"""Home: GPUs known (spec + measured ceilings), the newest run's biggest findings, recent runs, what to do first."""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import home as page

src = store_access.source()
rep = page.build(src, {})
st.title(rep.title)
st.caption(rep.subtitle)
render_streamlit(rep)
widgets.share_panel("home", {}, [rep])
