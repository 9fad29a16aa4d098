"""The format registry: every input Kernelscope reads, one row each.

A row says how a file of the format is recognised (by its name alone, or by its decompressed
content), which function parses its bytes (and which reads it from a path as a stream), which check
runs on the parsed tables, the version of the tables the store keeps, what its item count counts,
and whether it is a timeline. Recognition, the parsers, the checks, the store and every list of
kinds (timelines, comparable runs) read this table, so adding a format is its parser module and one
`register` call. Parsers are named "module:function" and imported on first use, so reading one
format loads one parser.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable

from collectors.decompress import is_tar


@dataclass(frozen=True)
class Format:
    kind: str  # the stored run's kind ("ncu", "kineto", ...)
    label: str  # what a user calls it
    parser: str  # "module:function": (bytes, name) -> Parsed
    # version of its stored tables; None: parsed into another kind, never stored
    table_version: int | None
    item_label: str = "items"  # what its item count counts
    timeline: bool = False  # a timeline of GPU ops (the Timeline page, steps, launch gaps)
    # "module:function": (path, name) -> Parsed, read without holding the file
    streamed: str | None = None
    #: (first bytes, lower-case inner name, gzip-compressed file) -> whether `streamed` can read
    #: this file
    stream_if: Callable[[bytes, str, bool], bool] | None = None
    # "module:function": `streamed` reading only what the analysis needs
    streamed_partial: str | None = None
    # "module:function": (Parsed, name) -> None, raises ArtifactError
    check: str | None = None
    # the lower-case name alone says it is this format
    by_name: Callable[[str], bool] | None = None
    # (first 4 KiB, data, lower-case name)
    by_content: Callable[[bytes, bytes, str], bool] | None = None
    # content rules are tried from the lowest (a bench document before other JSON)
    content_order: int = 50


def resolve(ref: str) -> Callable:
    mod, _, fn = ref.partition(":")
    return getattr(importlib.import_module(mod), fn)


def _sqlite(head: bytes, data: bytes, lname: str) -> bool:
    return head.startswith(b"SQLite format 3\x00")


def _json(head: bytes) -> bool:
    return head.lstrip()[:1] in (b"{", b"[")


def _bench(head: bytes, data: bytes, lname: str) -> bool:
    return _json(head) and b'"kernelscope_bench"' in data[:65536]


def kineto_tar(head: bytes, lname: str) -> bool:
    """A folder of rank traces packed as one tar (collectors.ingest.pack_rank_folder) or a .kineto.tar."""
    if not is_tar(head):
        return False
    first = head[:100].split(b"\0", 1)[0].lower()
    return lname.endswith(".kineto.tar") or first.endswith((b".json", b".json.gz"))


def _kineto(head: bytes, data: bytes, lname: str) -> bool:
    return kineto_tar(head, lname) or _json(head)


def _ncu_text(head: bytes, data: bytes, lname: str) -> bool:
    text = head.decode("utf-8", errors="replace")
    # an ncu log with the permission error is explained by the ncu reader
    return (
        '"Kernel Name"' in text
        or "==PROF==" in text
        or "ERR_NVGPUCTRPERM" in text
        or lname.endswith(".csv")
    )


#: kind -> Format
FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add (or replace) a format. Name rules are tried first, then content rules by `content_order`."""
    FORMATS[fmt.kind] = fmt
    return fmt


register(
    Format(
        "ncu",
        "Nsight Compute report (.ncu-rep) or CSV export",
        "collectors.ncu:parse",
        10,
        "profiled launches",
        streamed="collectors.ncu:parse_file",
        check="collectors.validate:check_ncu",
        # CSV only
        stream_if=lambda head, n, gz: not n.endswith((".ncu-rep", ".nsight-cuprof-report")),
        streamed_partial="collectors.ncu:parse_file_analysis",
        by_name=lambda n: n.endswith((".ncu-rep", ".nsight-cuprof-report")),
        by_content=_ncu_text,
        content_order=90,
    )
)
register(
    Format(
        "nsys-rep",
        "Nsight Systems report (.nsys-rep)",
        "collectors.nsys:parse_report",
        None,
        by_name=lambda n: n.endswith((".nsys-rep", ".qdrep")),
    )
)
register(
    Format(
        "nsys",
        "Nsight Systems SQLite export",
        "collectors.nsys:parse",
        5,
        "kernels",
        timeline=True,
        streamed="collectors.nsys:parse_file",
        check="collectors.validate:check_timeline",
        # SQLite reads a file on disk, not a gzip stream
        stream_if=lambda head, n, gz: not gz,
        by_content=_sqlite,
        content_order=10,
    )
)
register(
    Format(
        "bench",
        "kernelscope bench result",
        "collectors.bench.results:parse",
        3,
        "results",
        check="collectors.validate:check_bench",
        by_content=_bench,
        content_order=20,
    )
)
register(
    Format(
        "kineto",
        "PyTorch profiler trace (.json, .json.gz)",
        "collectors.kineto:parse",
        5,
        "kernels",
        timeline=True,
        streamed="collectors.kineto:parse_file",
        check="collectors.validate:check_timeline",
        # a packed folder of ranks is read whole
        stream_if=lambda head, n, gz: not is_tar(head),
        by_content=_kineto,
        content_order=30,
    )
)


def detect(data: bytes, name: str) -> Format | None:
    """The format of an (already decompressed) artifact: a name rule first, then the content rules in order."""
    lname = name.lower()
    for f in FORMATS.values():
        if f.by_name is not None and f.by_name(lname):
            return f
    head = data[:4096]
    for f in sorted(FORMATS.values(), key=lambda f: f.content_order):
        if f.by_content is not None and f.by_content(head, data, lname):
            return f
    return None


def stored(kind: str) -> Format | None:
    f = FORMATS.get(kind)
    return f if f is not None and f.table_version is not None else None


class _Live(Mapping):
    """A read-only mapping over the stored formats, computed on each access (a format registered later is in it)."""

    def __init__(self, value: Callable[[Format], object]):
        self._value = value

    def __getitem__(self, kind):
        f = stored(kind)
        if f is None:
            raise KeyError(kind)
        return self._value(f)

    def __iter__(self):
        return (k for k, f in FORMATS.items() if f.table_version is not None)

    def __len__(self):
        return sum(1 for _ in self)


class _LiveKinds(Sequence):
    """A read-only sequence of the stored kinds that pass `keep`, computed on each access."""

    def __init__(self, keep: Callable[[Format], bool]):
        self._keep = keep

    def _kinds(self) -> tuple[str, ...]:
        return tuple(k for k, f in FORMATS.items() if f.table_version is not None and self._keep(f))

    def __getitem__(self, i):
        return self._kinds()[i]

    def __len__(self):
        return len(self._kinds())

    def __contains__(self, kind):
        return kind in self._kinds()

    def __repr__(self):
        return repr(self._kinds())


#: stored kind -> version of its tables (bump a format's version when its parser's output changes:
#: stored runs are re-derived from their kept artifact). ncu 9: enum casts in names (issue 39); 10: a
#: report's SASS text and source lines are read per launch when shown, not at ingest
TABLE_VERSIONS: Mapping[str, int] = _Live(lambda f: f.table_version)
#: stored kind -> what its item count counts
ITEM_LABELS: Mapping[str, str] = _Live(lambda f: f.item_label)
#: every stored kind
KINDS: Sequence[str] = _LiveKinds(lambda f: True)
#: the kinds that are timelines of GPU ops
TRACE_KINDS: Sequence[str] = _LiveKinds(lambda f: f.timeline)
