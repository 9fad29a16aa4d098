"""The bounds every reader keeps, so that one hostile or broken file costs bounded time and memory.

More: docs/architecture.md, *collectors.limits*.
"""

from __future__ import annotations

import os

ENV_ARTIFACT_MB = "KERNELSCOPE_MAX_DECOMPRESSED_MB"
#: the command line's default for one artifact after decompression (the dashboard's is its upload
#: cap)
DEFAULT_ARTIFACT_MB = 4096
MAX_ROWS = 50_000_000
MAX_JSON_DEPTH = 64
MAX_STRING_CHARS = 1 << 16
MAX_SOURCE_CHARS = 16 << 20
#: string columns allowed to hold more than a name: (table, column) -> their limit
LONG_STRING_COLUMNS = {("source_files", "content"): MAX_SOURCE_CHARS}


def _env_float(name: str, default: float) -> float:
    try:
        v = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return v if v > 0 else default


def max_artifact_bytes() -> int:
    """Largest artifact accepted after decompression, in bytes (MB = 10^6 bytes, as the upload cap)."""
    return int(_env_float(ENV_ARTIFACT_MB, DEFAULT_ARTIFACT_MB) * 1e6)


def sqlite_seconds() -> float:
    return _env_float("KERNELSCOPE_SQLITE_SECONDS", 120.0)


def ncu_child_seconds() -> float:
    return _env_float("KERNELSCOPE_NCU_SECONDS", 300.0)


def ncu_child_memory_bytes() -> int:
    """Address-space limit of the .ncu-rep reader's process: 4 GiB plus 16 × the report (NVIDIA's
    library maps a few hundred MiB by itself; a report's metrics expand about tenfold in memory)."""
    return int(_env_float("KERNELSCOPE_NCU_MEMORY_MB", 0) * 1e6) or 0


def size_text(n: int) -> str:
    """A byte count as the limits are given: MB (10^6 bytes) above 1 MB."""
    if n >= 1_000_000:
        return f"{n / 1e6:,.0f} MB"
    if n >= 1000:
        return f"{n / 1e3:,.0f} kB"
    return f"{n} bytes"


def artifact_limit_hint() -> str:
    return (
        f"the limit for one artifact is {size_text(max_artifact_bytes())} after decompression "
        f"(raise it with --max-decompressed-mb)"
    )
