"""Home: GPUs known (spec + measured ceilings), the newest run's biggest findings, recent runs, what to do first."""
from __future__ import annotations

import streamlit as st

from dashboard import data, pages, ui
from dashboard.report import render_streamlit

src = data.source()
rep = pages.home(src)
st.title(rep.title)
st.caption(rep.subtitle)
render_streamlit(rep)
ui.share_panel("home", {}, [rep])
