"""The test session's cache of what NVIDIA's library read from an `.ncu-rep` (collectors.ncu's
`_parse_report`: the container check, then the sandboxed child). Many test modules ingest the same
recorded reports (the compiled decode's token takes 8 s to read on a 2-core machine); each report
is read once per test session and shared by every xdist worker through a folder under pytest's
base temporary directory. Only successful reads of the same bytes are reused, so a mutant, a
limit or a failure is always read for real; tests of the reader itself call it directly
(`collectors.sandbox.run_reader`, `ncu.read_report_file`), which this leaves alone. Subprocesses
(the CLI, the dashboard server) read for themselves."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

#: the environment variables that change how the reader runs: a test that sets one reads for real
_LIMITS = ("KERNELSCOPE_NCU_SECONDS", "KERNELSCOPE_NCU_MEMORY_MB")


def install(monkeypatch, folder: Path) -> None:
    """Wrap collectors.ncu._parse_report with a cache in `folder` for the rest of the session."""
    from collectors import ncu, progress

    real = ncu._parse_report
    folder.mkdir(parents=True, exist_ok=True)

    def cached(data: bytes, name: str):
        if any(os.environ.get(k) for k in _LIMITS) or progress.listening():
            return real(data, name)
        path = folder / (hashlib.sha256(data).hexdigest() + ".pickle")
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError):
            pass
        out = real(data, name)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)  # atomic: another worker reads a whole file or none
        return out

    monkeypatch.setattr(ncu, "_parse_report", cached)
