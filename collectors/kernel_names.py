"""Kernel names: one canonical name per kernel whatever demangler wrote it, and a short display name
per run.

More: docs/architecture.md, *collectors.kernel_names*.
"""

from __future__ import annotations

import re
from functools import lru_cache

_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|\{anonymous\}|[A-Za-z_]\w*)::")
_INT_CAST = re.compile(
    r"\((?:(?:unsigned|signed|const)\s+)*(?:int|long(?:\s+long)?|short|char|bool|unsigned|"
    r"(?:u?int\d+_t)|size_t)\)\s*(-?\d+)"
)
#: an enum (or any named type) cast of an integer template argument: `(ADAM_MODE)1`,
#: `(at::native::Mode)-1`; the ncu command line's CSV exports write the bare number
_ENUM_CAST = re.compile(r"\((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\)\s*(-?\d+)")
_INT_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|lu|u|l)\b", re.IGNORECASE)
_SPACE_AROUND = re.compile(r"\s*([<>(),*&\[\]])\s*")


def _top_level(name: str) -> tuple[int, int]:
    """(start of the function name, index of the parameter list's "(") at bracket depth 0; -1 when absent."""
    depth = 0
    start, paren = 0, -1
    for i, ch in enumerate(name):
        if ch in "<[{":
            depth += 1
        elif ch in ">]}":
            depth = max(0, depth - 1)
        elif ch == "(":
            if depth == 0 and not name.startswith("(anonymous namespace)", i):
                paren = i
                break
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            start = i + 1
    return start, paren


@lru_cache(maxsize=1 << 16)
def canonical_name(name: str) -> str:
    """The canonical form of a (demangled) kernel name (module docstring). Idempotent. Cached: a
    report names few distinct kernels over many launches."""
    s = " ".join((name or "").split())
    if not s:
        return s
    start, paren = _top_level(s)
    if paren >= 0:
        s = s[:paren]
        start = min(start, len(s))
    s = s[start:] if start < len(s) else s
    s = _INT_CAST.sub(r"\1", s)
    s = _ENUM_CAST.sub(r"\1", s)
    s = re.sub(r"\btrue\b", "1", s)
    s = re.sub(r"\bfalse\b", "0", s)
    s = _INT_SUFFIX.sub(r"\1", s)
    prev = None
    while prev != s:
        prev, s = s, _QUALIFIER.sub("", s)
    s = _SPACE_AROUND.sub(r"\1", s)
    return s.replace(",", ", ").strip() or " ".join((name or "").split())


def function_name(name: str) -> str:
    """The bare function name: `void foo::bar<128>(float*, int)` -> `bar`; `ks_copy_u4` -> `ks_copy_u4`."""
    c = canonical_name(name)
    cut = c.find("<")
    return (c[:cut] if cut > 0 else c) or c


def display_names(raw_names: list[str]) -> list[str]:
    """A label per launch (same order) that tells different kernels of one run apart: the function
    name when no other kernel of the run has it, else the canonical name (with template arguments;
    distinct by construction)."""
    canon = [canonical_name(n) for n in raw_names]
    by_func: dict[str, set[str]] = {}
    for c in set(canon):
        by_func.setdefault(function_name(c), set()).add(c)
    return [function_name(c) if len(by_func[function_name(c)]) == 1 else c for c in canon]
