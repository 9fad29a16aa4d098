"""The page registry: every dashboard page, one row each.

A row says the page's URL slug, title, sidebar section and icon, the script that draws it
(dashboard/web/views/, or any path), the report module whose `build(src, params)` gives its content as a
`Report` for `kernelscope export` and the HTML export (None: not exportable), and the kinds of run
that open on it. The app's navigation, export, the links from a run to its page and the end-to-end
checks read this table, so adding a page is its view (and report) module and one `register` call. No
Streamlit here: the command line reads it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

VIEWS = Path(__file__).parent / "views"
SECTIONS = ("Kernelscope", "Analyse", "Hardware", "Textbook")


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    section: str  # one of SECTIONS
    view: str  # a script in dashboard/web/views/, or an absolute path
    icon: str  # a Material icon name, ":material/…:"
    # module with build(src, params) -> Report; None: not exportable
    report: str | None = None
    run_kinds: tuple[str, ...] = ()  # the kinds of run a link to a run opens on this page
    default: bool = False  # the page at "/"

    @property
    def path(self) -> Path:
        p = Path(self.view)
        return p if p.is_absolute() else VIEWS / p

    @property
    def script(self) -> str:
        """The script as st.Page takes it: relative to dashboard/web/app.py for the project's views."""
        p = Path(self.view)
        return str(p) if p.is_absolute() else f"views/{p}"


#: slug -> Page, in sidebar order within each section
PAGES: dict[str, Page] = {}


def register(page: Page) -> Page:
    if page.section not in SECTIONS:
        raise ValueError(
            f"page {page.slug!r}: unknown section {page.section!r} (sections: "
            f"{', '.join(SECTIONS)})"
        )
    PAGES[page.slug] = page
    return page


def _r(slug: str) -> str:
    return f"dashboard.web.reports.{slug}"


for _p in (
    Page("home", "Home", "Kernelscope", "home.py", ":material/home:", _r("home"), default=True),
    Page("upload", "Upload", "Kernelscope", "upload.py", ":material/upload:"),
    Page("runs", "Runs", "Kernelscope", "runs.py", ":material/list:", _r("runs")),
    Page(
        "kernels",
        "Kernels",
        "Analyse",
        "kernels.py",
        ":material/memory:",
        _r("kernels"),
        run_kinds=("ncu",),
    ),
    Page(
        "timeline",
        "Timeline",
        "Analyse",
        "timeline.py",
        ":material/timeline:",
        _r("timeline"),
        run_kinds=("kineto", "nsys"),
    ),
    Page("ranks", "Ranks", "Analyse", "ranks.py", ":material/grid_on:", _r("ranks")),
    Page("history", "History", "Analyse", "history.py", ":material/query_stats:", _r("history")),
    Page("compare", "Compare", "Analyse", "compare.py", ":material/compare_arrows:", _r("compare")),
    Page(
        "gpus",
        "GPUs",
        "Hardware",
        "gpus.py",
        ":material/developer_board:",
        _r("gpus"),
        run_kinds=("bench",),
    ),
    Page("live", "Live", "Hardware", "live.py", ":material/monitor_heart:"),
    Page("cases", "Textbook cases", "Textbook", "cases.py", ":material/menu_book:", _r("cases")),
    Page("claims", "Claims", "Textbook", "claims.py", ":material/fact_check:", _r("claims")),
):
    register(_p)


def sections() -> dict[str, list[Page]]:
    """Section -> its pages whose script exists, in order; sections with none are left out."""
    out: dict[str, list[Page]] = {}
    for p in PAGES.values():
        if p.path.is_file():
            out.setdefault(p.section, []).append(p)
    return {s: out[s] for s in SECTIONS if s in out}


class _Exportable(Sequence):
    """The slugs of the exportable pages, read from the registry on each access."""

    def _slugs(self) -> tuple[str, ...]:
        return tuple(s for s, p in PAGES.items() if p.report)

    def __getitem__(self, i):
        return self._slugs()[i]

    def __len__(self):
        return len(self._slugs())

    def __contains__(self, slug):
        return slug in self._slugs()


class _PageForKind(Mapping):
    """Run kind -> the slug of the page its runs open on, read from the registry on each access."""

    def _map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for s, p in PAGES.items():
            for k in p.run_kinds:
                out.setdefault(k, s)
        return out

    def __getitem__(self, kind):
        return self._map()[kind]

    def __iter__(self):
        return iter(self._map())

    def __len__(self):
        return len(self._map())


EXPORTABLE: Sequence[str] = _Exportable()
PAGE_FOR_KIND: Mapping[str, str] = _PageForKind()
