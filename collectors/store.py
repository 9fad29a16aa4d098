"""The run store: immutable, content-addressed runs on disk, whose tables are re-derived when their
version changes.

More: docs/architecture.md, *collectors.store*.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from functools import cached_property
from pathlib import Path

import polars as pl

from collectors import index as run_index
from collectors.errors import ArtifactError, RunNotFound, StoreError
from collectors.ingest import companion_warnings, parse_bytes, read_path
from collectors.schema import ITEM_LABELS, TABLE_VERSIONS, Parsed, RunInfo
from collectors.freshness import RACY_S, default_store_dir  # noqa: F401  (RACY_S: the store's rule)
from collectors.freshness import settled as _settled
from collectors.freshness import stamp as _stamp

MANIFEST = "manifest.json"
META = "meta.json"
RUN_ID_LEN = 16
STORE_FORMAT = 2
_RUN_ID = re.compile(r"[0-9a-f]{4,16}")


def run_id_for(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:RUN_ID_LEN]


class Run:
    """A stored run: a read-only view of one run folder (its tables re-derived first when out of date)."""

    def __init__(
        self,
        path: Path,
        *,
        stamp: tuple | None = None,
        manifest: dict | None = None,
        info: RunInfo | None = None,
    ):
        self.path = Path(path)
        self._memory: Parsed | None = None  # tables re-derived but not writable to the store
        # the run folder's stamp when this view was made (listing cache)
        self._stamp = stamp
        self._made_ns = time.time_ns()
        self._info = info  # preloaded from the store's index
        if manifest is not None:
            self.__dict__["manifest"] = manifest

    def __repr__(self) -> str:
        return f"Run({self.path})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Run) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

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
    def source_name(self) -> str:
        return self.manifest["source_name"]

    @property
    def artifact_path(self) -> Path:
        return self.path / "artifact" / self.manifest["source_name"]

    # ---- the tables of the current version
    # --------------------------------------------------------
    @property
    def table_version(self) -> int:
        return TABLE_VERSIONS[self.kind]

    @cached_property
    def _tables_dir(self) -> Path | None:
        """The folder of this version's tables, re-derived from the artifact first when missing
        (None when they could only be kept in memory)."""
        d = self.path / f"tables-v{self.table_version}"
        if (d / META).is_file():
            return d
        parsed = self._reparse()
        try:
            return _write_tables_dir(self.path, d.name, parsed)
        except OSError:
            self._memory = parsed  # a read-only store: keep them in memory
            return None

    def _reparse(self) -> Parsed:
        try:
            data = self.artifact_path.read_bytes()
        except OSError as e:
            raise ArtifactError(
                f"run {self.run_id}", f"its artifact cannot be read ({e.strerror})"
            ) from None
        try:
            return parse_bytes(data, self.source_name)
        except ArtifactError as e:
            raise ArtifactError(
                f"run {self.run_id}",
                f"stored before a parser change and its artifact no longer reads: {e.problem}",
            ) from None

    @cached_property
    def meta(self) -> dict:
        d = self._tables_dir
        meta = self._memory.meta if d is None else json.loads((d / META).read_text())
        # what a file beside it said (collectors.ncu_log)
        extra = self.manifest.get("companion_warnings") or []
        if extra:
            meta = {
                **meta,
                "warnings": [
                    *(meta.get("warnings") or []),
                    *[w for w in extra if isinstance(w, str)],
                ],
            }
        return with_gpu_override(meta, self.manifest.get("gpu_override"))

    @property
    def tables(self) -> list[str]:
        d = self._tables_dir
        if d is None:
            return sorted(self._memory.tables)
        return sorted(p.stem for p in d.glob("*.parquet"))

    def table(self, name: str) -> pl.DataFrame:
        d = self._tables_dir
        if d is None:
            if name not in self._memory.tables:
                raise KeyError(f"run {self.run_id} has no table {name!r}")
            return self._memory.tables[name]
        p = d / f"{name}.parquet"
        if not p.is_file():
            raise KeyError(f"run {self.run_id} has no table {name!r}")
        return pl.read_parquet(p)

    def scan(self, name: str) -> pl.LazyFrame:
        """A lazy scan of one table (a worker reads only the rows it filters for, e.g. one rank)."""
        d = self._tables_dir
        if d is None:
            if name not in self._memory.tables:
                raise KeyError(f"run {self.run_id} has no table {name!r}")
            return self._memory.tables[name].lazy()
        p = d / f"{name}.parquet"
        if not p.is_file():
            raise KeyError(f"run {self.run_id} has no table {name!r}")
        return pl.scan_parquet(p)

    def as_parsed(self) -> Parsed:
        return Parsed(self.kind, {t: self.table(t) for t in self.tables}, self.meta)

    @property
    def info(self) -> RunInfo:
        if self._info is None:
            self._info = self._make_info()
        return self._info

    def _make_info(self) -> RunInfo:
        m, meta = self.manifest, self.meta
        return RunInfo(
            run_id=m["run_id"],
            kind=m["kind"],
            source_name=m["source_name"],
            size_bytes=int(m.get("size_bytes") or 0),
            created=float(m.get("created") or 0),
            gpu_name=meta.get("gpu_name"),
            gpu_uuid=meta.get("gpu_uuid"),
            item_count=meta.get("item_count"),
            item_label=ITEM_LABELS.get(m["kind"], "items"),
            warnings=tuple(meta.get("warnings") or ()),
        )


def _io_problem(e: BaseException) -> str:
    """The operating system's reason inside a library's error message ("No space left on device")."""
    text = str(e)
    for marker in (
        "No space left on device",
        "Disk quota exceeded",
        "Permission denied",
        "Read-only file system",
    ):
        if marker in text:
            return marker
    return " ".join(text.splitlines()[:1])[:160]


def _owner() -> str:
    """Who writes a temporary folder: host and process id, so that a later start can tell a dead writer's folder."""
    return f"{_host()}-{os.getpid()}"


def _host() -> str:
    return (socket.gethostname().split(".")[0].replace("-", "_") or "host")[:32]


def _writer_gone(name: str, max_age_s: float, mtime: float) -> bool:
    """A temporary folder (…-HOST-PID-xxxx) whose writer is not running: same host and no such
    process, or older than max_age_s (a writer on another host of a shared store)."""
    parts = name.split("-")
    host = _host()
    for i in range(len(parts) - 2):
        if parts[i] == host and parts[i + 1].isdigit():
            try:
                os.kill(int(parts[i + 1]), 0)
            except ProcessLookupError:
                return True
            except (PermissionError, OverflowError):
                pass
            return False
    return time.time() - mtime > max_age_s


def _manifest_ok(run: Run) -> bool:
    try:
        m = run.manifest
        return (
            isinstance(m, dict)
            and m.get("run_id") == run.path.name
            and m.get("kind") in TABLE_VERSIONS
            and isinstance(m.get("source_name"), str)
            and _safe_name(m["source_name"]) == m["source_name"]
        )
    except (OSError, ValueError):
        return False


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _safe_name(name: str) -> str:
    """A file name to keep the artifact under: its last path component, without control characters,
    at most 200 characters (a hostile upload name never reaches outside the run folder)."""
    base = Path(str(name).replace("\\", "/")).name
    base = "".join(ch for ch in base if ch.isprintable() and ch not in "/\x00")[-200:].strip()
    return base if base and base not in (".", "..") else "artifact"


def with_gpu_override(meta: dict, gpu: str | None) -> dict:
    """The metadata as read with a GPU given by the user (`--gpu`, kept in the run's manifest):
    gpu_name becomes that GPU, the file's own name stays in gpu_name_in_file. Without one, the
    metadata unchanged."""
    if not gpu:
        return meta
    out = dict(meta)
    out.setdefault("gpu_name_in_file", meta.get("gpu_name"))
    out["gpu_override"] = gpu
    out["gpu_name"] = gpu
    return out


def _write_tables_dir(run_dir: Path, name: str, parsed: Parsed) -> Path:
    """Write parsed tables + meta into run_dir/name atomically (temp folder, then rename). A Parsed
    read in part (Parsed.partial_rows: `analyze`'s reading of a raw page) is never written."""
    if parsed.partial_rows:
        raise ValueError(f"tables read in part ({', '.join(parsed.partial_rows)}) are never stored")
    final = run_dir / name
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-{_owner()}-", dir=run_dir))
    try:
        for tname, df in parsed.tables.items():
            try:
                df.write_parquet(tmp / f"{tname}.parquet")
            # polars reports a failed write (a full disk) as its own error
            except pl.exceptions.PolarsError as e:
                raise OSError(_io_problem(e)) from None
        (tmp / META).write_text(json.dumps(parsed.meta, indent=1, default=str))
        try:
            os.rename(tmp, final)
        except OSError:
            if (final / META).is_file():  # another process got there first
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            raise
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


SETTINGS = "settings.json"
_LOCK = threading.Lock()
#: runs folder (resolved) -> (its stamp, whether that listing was settled, the runs newest first, by
#: folder name, the unreadable folders)
_LISTINGS: dict[str, tuple[tuple, bool, list[Run], dict[str, Run], list[tuple[str, str]]]] = {}


class Store:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root).expanduser() if root else default_store_dir()
        self.runs_dir = self.root / "runs"

    # ---- settings (the user's choices about the store's runs: pinned / excluded ceilings)
    # ---------------
    def settings(self) -> dict:
        """<store>/settings.json, or {} (also when it cannot be read)."""
        try:
            v = json.loads((self.root / SETTINGS).read_text())
        except (OSError, ValueError):
            return {}
        return v if isinstance(v, dict) else {}

    def settings_stamp(self) -> float:
        try:
            return (self.root / SETTINGS).stat().st_mtime_ns
        except OSError:
            return 0

    def update_settings(self, change) -> dict:
        """Apply change(settings) -> settings under a lock and write the file atomically (temp file + rename)."""
        import fcntl

        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(self.root / ".settings.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                new = change(self.settings())
                fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=self.root)
                try:
                    with os.fdopen(fd, "w") as f:
                        json.dump(new, f, indent=1, sort_keys=True)
                    os.replace(tmp, self.root / SETTINGS)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
        except OSError as e:
            raise StoreError(
                str(self.root / SETTINGS), f"cannot write the store's settings ({e.strerror or e})"
            ) from None
        return new

    # ---- reading ----------------------------------------------------------------------------
    def runs(self) -> list[Run]:
        """All complete runs, newest first. Cached by change time (module docstring): an unchanged
        store is listed without reading it, and a run folder that did not change keeps its Run
        (manifest and metadata read once). A run folder whose manifest cannot be read (or names
        anything but a plain file) is left out, and listed by `unreadable()`, so one damaged folder
        never hides the others."""
        return list(self._listing()[0])

    def unreadable(self) -> list[tuple[str, str]]:
        """(folder name, problem) of run folders whose manifest cannot be read: found by the same
        listing as `runs()`, and cached with it (a page that shows both reads no manifest twice)."""
        return list(self._listing()[1])

    def _listing(self) -> tuple[list[Run], list[tuple[str, str]]]:
        """(the runs newest first, the unreadable folders by name): from the cache while the runs
        folder's stamp is unchanged and was settled when read; else the folder is listed again,
        keeping the Run of each run folder that did not change since."""
        stamp = _stamp(self.runs_dir)
        if stamp is None:
            return [], []
        key = str(self.runs_dir.resolve())
        with _LOCK:
            hit = _LISTINGS.get(key)
        if hit is not None and hit[0] == stamp and hit[1]:
            return hit[2], hit[4]
        now = time.time_ns()
        old = hit[3] if hit is not None else {}
        out, bad = [], []
        try:
            entries = list(self.runs_dir.iterdir())
        except OSError:
            return [], []
        for p in entries:
            if p.name.startswith("."):
                continue
            # not a run folder; one with a manifest is a damaged run
            if not _RUN_ID.fullmatch(p.name):
                if (p / MANIFEST).is_file() and not _manifest_ok(Run(p)):
                    bad.append((p.name, "its manifest.json cannot be read"))
                continue
            rs = _stamp(p)
            prev = old.get(p.name)
            if (
                prev is not None
                and rs is not None
                and prev._stamp == rs
                and _settled(rs, prev._made_ns)
            ):
                out.append(prev)
            elif rs is not None and (p / MANIFEST).is_file():
                run = Run(p, stamp=rs)
                if _manifest_ok(run):
                    out.append(run)
                else:
                    bad.append((p.name, "its manifest.json cannot be read"))
        out.sort(key=lambda r: (_num(r.manifest.get("created")), r.run_id), reverse=True)
        bad.sort()
        with _LOCK:
            _LISTINGS[key] = (stamp, _settled(stamp, now), out, {r.path.name: r for r in out}, bad)
        return out, bad

    def get(self, run_id: str) -> Run:  # noqa: C901
        """A run by id, or by a unique prefix of at least 4 hex digits. RunNotFound otherwise (also
        for anything that is not a run id: a path never reaches the file system)."""
        rid = str(run_id).strip()
        if not _RUN_ID.fullmatch(rid):
            raise RunNotFound(rid, "not a run id (16 hex digits, or a unique prefix of at least 4)")
        p = self.runs_dir / rid
        if len(rid) == RUN_ID_LEN and (p / MANIFEST).is_file():
            if not _manifest_ok(Run(p)):
                raise RunNotFound(rid, "its folder is damaged (manifest.json cannot be read)")
            return self._listed(p)
        if self.runs_dir.is_dir():
            hits = [
                q
                for q in self.runs_dir.iterdir()
                if q.name.startswith(rid)
                and _RUN_ID.fullmatch(q.name)
                and (q / MANIFEST).is_file()
                and _manifest_ok(Run(q))
            ]
            if len(hits) == 1:
                return self._listed(hits[0])
            if len(hits) > 1:
                raise RunNotFound(rid, f"the prefix is ambiguous ({len(hits)} runs)")
        raise RunNotFound(rid)

    # ---- deleting: the one change to a stored run a user may make
    # -------------------------------------
    def delete(self, run_id: str) -> Run:
        """Remove a run (id or unique prefix): its folder is first renamed out of the listing in one
        atomic step (runs/.deleted-<id>-<random>), then removed, so a reader never sees half a run
        and a crash leaves only a hidden folder, which the next delete sweeps away. Returns the run
        as it was (its manifest read first). RunNotFound for an unknown id; StoreError when the
        store cannot be written."""
        run = self.get(run_id)
        _ = run.manifest  # read before it goes
        gone = self.runs_dir / f".deleted-{run.run_id}-{os.urandom(4).hex()}"
        try:
            os.rename(run.path, gone)
        except FileNotFoundError:
            raise RunNotFound(run.run_id, "was deleted by someone else meanwhile") from None
        except OSError as e:
            raise StoreError(
                str(run.path), f"cannot delete run {run.run_id} ({e.strerror or e})"
            ) from None
        shutil.rmtree(gone, ignore_errors=True)
        for old in self.runs_dir.glob(".deleted-*"):  # leftovers of an interrupted delete
            shutil.rmtree(old, ignore_errors=True)
        # the index is a cache: drop the run's rows now
        if run_index.index_dir(self.root).is_dir():
            try:
                ids = self.run_ids()
                run_index.compact(self.root, keep=lambda rs: set(rs) & ids)
            except OSError:
                pass  # refresh_index drops it on the next read
        return run

    def run_ids(self) -> set[str]:
        """The ids of the complete runs, from the folder names alone (a run folder appears complete,
        by one rename, and temporary folders start with a dot)."""
        if not self.runs_dir.is_dir():
            return set()
        return {
            e.name for e in os.scandir(self.runs_dir) if _RUN_ID.fullmatch(e.name) and e.is_dir()
        }

    # ---- the run index (collectors.index)
    # ----------------------------------------------------------
    def refresh_index(self, log=None) -> dict:
        """Bring the index in line with the runs: index runs it lacks (stored by an older version,
        or whose segment could not be written) and runs indexed with an older table version, drop
        runs that are gone. Raises OSError when the index cannot be written."""
        ids = self.run_ids()
        base_version = run_index.stats(self.root)["version"]
        if base_version is not None and base_version != run_index.INDEX_VERSION:
            if log:
                log(
                    f"rebuilding the run index (format {base_version} -> {run_index.INDEX_VERSION})"
                )
            return {"added": self.reindex(), "dropped": 0}
        have, stale = run_index.indexed(self.root)
        todo = sorted((ids - have) | (stale & ids))
        if log and len(todo) > 50:
            log(f"indexing {len(todo)} runs ...")
        for i in range(0, len(todo), 256):
            run_index.add_runs(self.root, [Run(self.runs_dir / r) for r in todo[i : i + 256]])
        gone = set(have) - ids
        if gone:
            run_index.compact(self.root, keep=lambda rs: set(rs) & ids)
        return {"added": len(todo), "dropped": len(gone)}

    def reindex(self) -> int:
        """Rebuild the index from every run; returns the number of runs indexed."""
        return run_index.rebuild(self.root, self.runs())

    def index(self, refresh: bool = True, log=None):
        """The run index (collectors.index.Index), refreshed first."""
        if refresh:
            self.refresh_index(log)
        return run_index.open_index(self.root)

    def _listed(self, p: Path) -> Run:
        """The Run of the cached listing for folder p when that folder did not change since, else a new one."""
        with _LOCK:
            hit = _LISTINGS.get(str(self.runs_dir.resolve()))
        r = hit[3].get(p.name) if hit is not None else None
        if r is not None and r._stamp == _stamp(p) and _settled(r._stamp, r._made_ns):
            return r
        return Run(p)

    def __contains__(self, run_id: str) -> bool:
        return (
            bool(_RUN_ID.fullmatch(str(run_id))) and (self.runs_dir / run_id / MANIFEST).is_file()
        )

    # ---- writing ----------------------------------------------------------------------------
    def put_bytes(
        self,
        data: bytes,
        name: str,
        parsed: Parsed | None = None,
        *,
        gpu: str | None = None,
        companion: list[str] | None = None,
    ) -> tuple[Run, bool]:
        """Store one artifact as given: the store stores, it does not judge. Returns (run,
        created). Raises ArtifactError on what cannot be parsed; nothing is written unless parsing
        succeeded. Every command, page and test ingests through the core's one entry point,
        dashboard.core.source.Source.ingest_bytes / ingest_path (parse, check that it can be
        analysed, then this); only the store's own tests call this directly
        (tests/test_layout.py). `gpu`: the GPU the user names for it (`--gpu`),
        kept in the manifest (the tables stay what the file says, so a re-derived run keeps it). The
        same bytes are one run: a second ingest returns the stored run as it is. The name is kept as a plain file name (`_safe_name`)."""
        name = _safe_name(name)
        rid = run_id_for(data)
        if rid in self:
            return Run(self.runs_dir / rid), False
        if parsed is None:
            parsed = parse_bytes(data, name)
        return self._write(rid, data, name, parsed, gpu, companion)

    def put_path(self, path: str | os.PathLike, *, gpu: str | None = None) -> tuple[Run, bool]:
        """A file, or a folder of rank traces (one run); errors name the path as given. A console
        log saved beside an Nsight Compute report (collectors.ncu_log) adds its warnings, kept in
        the manifest."""
        data, name = read_path(path)
        try:
            if run_id_for(data) in self:
                return self.put_bytes(data, name, gpu=gpu)
            parsed = parse_bytes(data, name)
            return self.put_bytes(
                data, name, parsed, gpu=gpu, companion=companion_warnings(parsed, path)
            )
        except ArtifactError as e:
            raise ArtifactError(str(path), e.problem) from None

    def housekeeping(self) -> int:
        """On start: the store's leftover temporary folders and the .ncu-rep reader's (collectors.sandbox)."""
        from collectors.sandbox import sweep_stale

        return self.clean_stale() + sweep_stale()

    def clean_stale(self, max_age_s: float = 24 * 3600) -> int:
        """Remove the temporary folders of interrupted ingests and re-derivations (a writer killed
        mid-way): those whose writer process is gone on this host, or older than max_age_s. Returns
        how many."""
        n = 0
        try:
            tops = [e for e in os.scandir(self.runs_dir) if e.name.startswith(".tmp-")]
        except OSError:
            return 0
        inner = []
        for e in os.scandir(self.runs_dir):
            if _RUN_ID.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
                try:
                    inner += [x for x in os.scandir(e.path) if x.name.startswith(".tables-v")]
                except OSError:
                    continue
        for e in tops + inner:
            try:
                if e.is_dir(follow_symlinks=False) and _writer_gone(
                    e.name, max_age_s, e.stat().st_mtime
                ):
                    shutil.rmtree(e.path, ignore_errors=True)
                    n += 1
            except OSError:
                continue
        return n

    def _write(
        self,
        rid: str,
        data: bytes,
        name: str,
        parsed: Parsed,
        gpu: str | None = None,
        companion: list[str] | None = None,
    ) -> tuple[Run, bool]:
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{rid}-{_owner()}-", dir=self.runs_dir))
        except OSError as e:
            raise StoreError(
                str(self.runs_dir), f"cannot write to the store ({e.strerror or e})"
            ) from None
        try:
            (tmp / "artifact").mkdir()
            (tmp / "artifact" / name).write_bytes(data)
            _write_tables_dir(tmp, f"tables-v{TABLE_VERSIONS[parsed.kind]}", parsed)
            manifest = {
                "run_id": rid,
                "kind": parsed.kind,
                "source_name": name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_bytes": len(data),
                "created": time.time(),
                "format": STORE_FORMAT,
            }
            if gpu:
                manifest["gpu_override"] = gpu
            if companion:
                manifest["companion_warnings"] = list(companion)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
            final = self.runs_dir / rid
            try:
                os.rename(tmp, final)  # atomic; fails if another process got there first
            except OSError:
                if (final / MANIFEST).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                    return Run(final), False
                raise
            run = Run(final)
            try:
                # one segment, renamed into place; best effort:
                run_index.add_runs(self.root, [run])
            except (OSError, pl.exceptions.PolarsError):  # refresh_index adds what is missing
                pass
            return run, True
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            reason = e.strerror or str(e)
            try:
                if shutil.disk_usage(self.runs_dir).free < 1 << 20:
                    reason = "No space left on device"
            except OSError:
                pass
            raise StoreError(str(self.runs_dir), f"cannot write run {rid} ({reason})") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
