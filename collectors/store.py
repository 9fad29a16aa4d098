"""The run store: immutable, content-addressed runs on disk.

Layout (one folder per run, so several processes and shared folders are safe):

    <store>/runs/<run_id>/manifest.json      kind, source name, sha256, created, gpu, tables, meta
    <store>/runs/<run_id>/<table>.parquet    normalized tables
    <store>/runs/<run_id>/artifact/<name>    the original artifact, byte for byte

run_id = the first 16 hex digits of sha256(artifact bytes), so the same upload twice is one run and
a URL can name it. A run is written into a temporary folder beside the runs and renamed into place
in one step; a crash leaves no half run, and two processes ingesting the same file both end with the
same complete run (the loser of the rename discards its copy).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from collectors.artifact import Parsed, parse_bytes
from collectors.errors import ArtifactError

MANIFEST = "manifest.json"
RUN_ID_LEN = 16
SKIP_SUFFIXES = {".cu", ".py", ".sh", ".md", ".txt", ".cuh"}  # sources and notes beside samples


def default_store_dir() -> Path:
    env = os.environ.get("KERNELSCOPE_STORE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".kernelscope" / "store"


def run_id_for(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:RUN_ID_LEN]


@dataclass(frozen=True)
class Run:
    """A stored run: read-only view of one run folder."""

    path: Path

    @cached_property
    def manifest(self) -> dict:
        return json.loads((self.path / MANIFEST).read_text())

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def meta(self) -> dict:
        return self.manifest.get("meta", {})

    @property
    def tables(self) -> list[str]:
        return list(self.manifest.get("tables", []))

    def table(self, name: str) -> pl.DataFrame:
        if name not in self.tables:
            raise KeyError(f"run {self.run_id} has no table {name!r}")
        return pl.read_parquet(self.path / f"{name}.parquet")

    @property
    def artifact_path(self) -> Path:
        return self.path / "artifact" / self.manifest["source_name"]

    def as_parsed(self) -> Parsed:
        return Parsed(self.kind, {t: self.table(t) for t in self.tables}, self.meta)


class Store:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root).expanduser() if root else default_store_dir()
        self.runs_dir = self.root / "runs"

    # ---- reading ----------------------------------------------------------------------------
    def runs(self) -> list[Run]:
        """All complete runs, newest first."""
        if not self.runs_dir.is_dir():
            return []
        out = []
        for p in self.runs_dir.iterdir():
            if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file():
                out.append(Run(p))
        out.sort(key=lambda r: (r.manifest.get("created", 0), r.run_id), reverse=True)
        return out

    def get(self, run_id: str) -> Run:
        """A run by id, or by a unique prefix of at least 4 characters."""
        run_id = run_id.strip()
        p = self.runs_dir / run_id
        if len(run_id) == RUN_ID_LEN and (p / MANIFEST).is_file():
            return Run(p)
        if len(run_id) >= 4 and self.runs_dir.is_dir():
            hits = [q for q in self.runs_dir.iterdir() if q.name.startswith(run_id) and (q / MANIFEST).is_file()]
            if len(hits) == 1:
                return Run(hits[0])
            if len(hits) > 1:
                raise KeyError(f"run id prefix {run_id!r} is ambiguous ({len(hits)} runs)")
        raise KeyError(f"no run {run_id!r} in store {self.root}")

    def __contains__(self, run_id: str) -> bool:
        return (self.runs_dir / run_id / MANIFEST).is_file()

    # ---- writing ----------------------------------------------------------------------------
    def ingest_bytes(self, data: bytes, name: str, parsed: Parsed | None = None) -> tuple[Run, bool]:
        """Parse and store one artifact. Returns (run, created). Raises ArtifactError on bad input;
        nothing is written unless parsing succeeded."""
        name = Path(name).name or "artifact"
        rid = run_id_for(data)
        if rid in self:
            return Run(self.runs_dir / rid), False
        if parsed is None:
            parsed = parse_bytes(data, name)
        return self._write(rid, data, name, parsed)

    def ingest_path(self, path: str | os.PathLike) -> tuple[Run, bool]:
        p = Path(path)
        if p.is_dir():  # a folder of Kineto rank traces is one run (see expand_paths)
            from collectors.kineto import pack_rank_folder
            packed = pack_rank_folder(p)
            if packed is None:
                raise ArtifactError(str(p), "a folder is one run only when it holds Kineto traces of distinct ranks")
            return self.ingest_bytes(*packed)
        try:
            data = p.read_bytes()
        except OSError as e:
            raise ArtifactError(str(p), f"cannot read file ({e.strerror})") from None
        try:
            return self.ingest_bytes(data, p.name)
        except ArtifactError as e:
            raise ArtifactError(str(p), e.problem) from None

    def _write(self, rid: str, data: bytes, name: str, parsed: Parsed) -> tuple[Run, bool]:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{rid}-", dir=self.runs_dir))
        try:
            (tmp / "artifact").mkdir()
            (tmp / "artifact" / name).write_bytes(data)
            for tname, df in parsed.tables.items():
                df.write_parquet(tmp / f"{tname}.parquet")
            manifest = {
                "run_id": rid,
                "kind": parsed.kind,
                "source_name": name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_bytes": len(data),
                "created": time.time(),
                "tables": sorted(parsed.tables),
                "meta": parsed.meta,
                "format": 1,
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
            final = self.runs_dir / rid
            try:
                os.rename(tmp, final)  # atomic; fails if another process got there first
            except OSError:
                if (final / MANIFEST).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                    return Run(final), False
                raise
            return Run(final), True
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def expand_paths(paths: list[str | os.PathLike]) -> list[Path]:
    """Files as given; folders walked recursively (sorted), skipping hidden files and sources/notes.
    A folder that holds only Kineto traces of distinct ranks is returned itself, as one run
    (`Store.ingest_path` packs it with `collectors.kineto.pack_rank_folder`)."""
    from collectors.kineto import pack_rank_folder

    def walk(d: Path) -> list[Path]:
        if pack_rank_folder(d) is not None:
            return [d]
        found: list[Path] = []
        for q in sorted(d.iterdir()):
            if q.name.startswith("."):
                continue
            if q.is_dir():
                found.extend(walk(q))
            elif q.is_file() and q.suffix.lower() not in SKIP_SUFFIXES and q.name != "record_summary.json":
                found.append(q)
        return found

    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(walk(p))
        elif p.exists():
            out.append(p)
        else:
            raise ArtifactError(str(p), "no such file or folder")
    return out
