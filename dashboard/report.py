"""What a page shows, as data: titled blocks of text, tables and charts.

The page builders (`dashboard.pages`) return a `Report`; the app draws it with `render_streamlit`, the
export (`dashboard.export`) writes the same blocks into one offline HTML file. So an exported page has the
same tables and charts as the page in the browser.

Text blocks are a small markdown subset: `**bold**`, `` `code` `` and [links](url). Anything a user or a
profiled program named (kernel names, file names) goes into them only through `code()`, which the export
escapes and Streamlit shows literally.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dashboard.theme import Col


@dataclass
class Text:
    md: str
    kind: str = "markdown"        # markdown | caption | info | warning | error | success


@dataclass
class Heading:
    text: str
    level: int = 2                # 2 = subheader, 3 = smaller


@dataclass
class Table:
    name: str
    frame: pl.DataFrame
    cols: dict[str, Col]
    caption: str | None = None
    height: int | None = None
    static: bool = False          # a few rows, drawn as a plain table (cheaper in the browser than a data grid)


@dataclass
class Chart:
    name: str
    chart: Any                    # an altair chart
    caption: str | None = None


@dataclass
class Metrics:
    items: list[tuple]            # (label, value as shown, help) or (label, value, help, change as shown)
    lower_is_better: bool = False  # colour of the changes: a negative change is good (durations)


@dataclass
class Report:
    title: str
    blocks: list = field(default_factory=list)
    subtitle: str | None = None

    def add(self, *blocks) -> "Report":
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def tables(self) -> dict[str, Table]:
        return {b.name: b for b in self.blocks if isinstance(b, Table)}

    def charts(self) -> dict[str, Chart]:
        return {b.name: b for b in self.blocks if isinstance(b, Chart)}


def code(s) -> str:
    """Inline code span for any user-provided text (kernel or file names): shown literally in both renderers."""
    s = str(s).replace("\n", " ")
    ticks = "`"
    while ticks in s:
        ticks += "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


# ---------------------------------------------------------------------------------------------------
# Streamlit renderer
# ---------------------------------------------------------------------------------------------------

def _table_has_hide_index() -> bool:
    import inspect
    import streamlit as st
    return "hide_index" in inspect.signature(st.table).parameters


def column_config(cols: dict[str, Col]) -> dict:
    import streamlit as st
    cc = {}
    for name, c in cols.items():
        if c.kind == "link":
            cc[name] = st.column_config.LinkColumn(c.header, help=c.help, display_text=c.link_text)
        elif c.kind == "text":
            cc[name] = st.column_config.TextColumn(c.header, help=c.help)
        else:
            cc[name] = st.column_config.NumberColumn(c.header, help=c.help, format=c.fmt)
    return cc


def render_streamlit(blocks, container=None) -> None:
    """Draw blocks (a Report or a list of blocks) with Streamlit; charts keep the kernelscope theme."""
    import streamlit as st
    from dashboard.theme import ensure_theme
    ensure_theme()
    st_ = container or st
    if isinstance(blocks, Report):
        blocks = blocks.blocks
    for b in blocks:
        if isinstance(b, Text):
            if b.kind == "markdown":
                st_.markdown(b.md)
            else:
                getattr(st_, b.kind)(b.md)
        elif isinstance(b, Heading):
            (st_.subheader if b.level <= 2 else st_.markdown)(b.text if b.level <= 2 else f"**{b.text}**")
        elif isinstance(b, Table) and b.static:
            import polars as pl
            cols = [c for c in b.cols if c in b.frame.columns]
            shown = pl.DataFrame({b.cols[c].header: [b.cols[c].format(v) for v in b.frame[c].to_list()] for c in cols},
                                 schema={b.cols[c].header: pl.String for c in cols})
            st_.table(shown, hide_index=True) if _table_has_hide_index() else st_.table(shown)
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Table):
            frame = b.frame.select([c for c in b.cols if c in b.frame.columns])
            kw = {"height": b.height} if b.height else {}
            st_.dataframe(frame, hide_index=True, width="stretch", column_config=column_config(b.cols),
                          key=f"table-{b.name}", **kw)
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Chart):
            st_.altair_chart(b.chart, theme=None, width="stretch", key=f"chart-{b.name}")
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Metrics):
            per_row = 3 if len(b.items) > 5 else max(1, len(b.items))
            for i in range(0, len(b.items), per_row):
                cols = st_.columns(per_row)
                for col, (label, value, help_, *delta) in zip(cols, b.items[i:i + per_row]):
                    col.metric(label, value, delta=delta[0] if delta else None, help=help_,
                               delta_color="inverse" if b.lower_is_better else "normal")
        else:  # pragma: no cover - a builder bug
            raise TypeError(f"unknown block {type(b).__name__}")
