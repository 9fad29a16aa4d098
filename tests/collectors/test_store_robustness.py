"""The store under crashes, a full disk and concurrent writers, with real processes:

- kill -9 of a writer at 20 random moments: never a partial, damaged or duplicated run; the next
  start removes the temporary folders the killed writer left;
- a full disk (a real tmpfs where this machine allows mounting one — as root, or in a user namespace
  with `unshare`; else a file-size limit, RLIMIT_FSIZE, which fails writes with EFBIG instead of
  ENOSPC): each file that does not fit is one line, the other files are still attempted, nothing
  half-written stays;
- 8 writers × 10 rounds on the same store, ingesting the same files and their own: every run
  complete and intact, each exactly once, every "new" claimed by exactly one writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


from tests.conftest import H200_KERNELS, H200_TORCH, REPO

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def check_store(root: Path, *, allow_tmp: bool = False) -> list[str]:
    """Every run folder complete and intact (manifest, artifact with its sha256, tables and meta); the run ids."""
    runs = root / "runs"
    ids = []
    if not runs.is_dir():
        return ids
    for p in sorted(runs.iterdir()):
        if p.name.startswith("."):
            assert allow_tmp, f"temporary folder left: {p.name}"
            continue
        m = json.loads((p / "manifest.json").read_text())
        assert m["run_id"] == p.name
        art = (p / "artifact" / m["source_name"]).read_bytes()
        assert hashlib.sha256(art).hexdigest() == m["sha256"] and len(art) == m["size_bytes"]
        tables = [d for d in p.glob("tables-v*") if not d.name.startswith(".")]
        assert tables and all((d / "meta.json").is_file() for d in tables)
        assert not [d for d in p.iterdir() if d.name.startswith(".")] or allow_tmp
        ids.append(p.name)
    assert len(ids) == len(set(ids))
    return ids


def test_kill_9_at_20_moments_leaves_only_complete_runs_and_the_next_start_cleans_up(tmp_path):
    root = tmp_path / "store"
    rng = random.Random(5)
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.collectors.store_writer", str(root), "loop"],
            cwd=REPO,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        check_store(root, allow_tmp=True)  # whatever moment: only complete runs
    from collectors.store import Store
    from dashboard.core.source import Source

    st = Store(root)
    st.housekeeping()  # the next start
    ids = check_store(root)  # no temporary folder is left
    assert len(ids) >= 3
    assert len(Source(st).runs()) == len(ids)  # and every run reads


def _mount_mode(path: Path) -> str:
    """How this machine gives a real small file system: "root" (mount tmpfs), "userns" (unshare -rm,
    a user and mount namespace), else "rlimit" (no tmpfs: writes fail by RLIMIT_FSIZE, EFBIG instead
    of ENOSPC)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True
        )
        if r.returncode == 0:
            subprocess.run(["umount", str(path)], capture_output=True)
            return "root"
    if shutil.which("unshare"):
        r = subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {path}"],
            capture_output=True,
        )
        if r.returncode == 0:
            return "userns"
    return "rlimit"


CHECK = (
    "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path; "
    "from tests.collectors.test_store_robustness import check_store; "
    'print("RUNS", len(check_store(Path(sys.argv[1]))))'
)


def test_a_full_disk_is_one_line_per_file_and_the_other_files_are_still_attempted(tmp_path):
    mnt = tmp_path / "small"
    mode = _mount_mode(mnt)
    files = [
        H200_KERNELS / "basic_raw.csv.gz",
        H200_KERNELS / "full.ncu-rep.gz",
        H200_KERNELS / "full_raw.csv.gz",
        H200_TORCH / "ffn_M1_graph.json.gz",
        H200_TORCH / "triton_add_x300.json.gz",
        H200_KERNELS / "full_details.csv.gz",
    ]
    exe = str(Path(sys.executable).with_name("kernelscope"))
    store = mnt / "store"
    ingest = [exe, "ingest", *map(str, files), "--store", str(store)]
    check = [sys.executable, "-c", CHECK, str(store), str(REPO)]
    q = lambda argv: " ".join(f"'{a}'" for a in argv)  # noqa: E731
    if mode == "rlimit":
        code = (
            "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (600_000, 600_000)); "
            "from dashboard.cli import main; sys.exit(main(sys.argv[1:]))"
        )
        script = f"{q([sys.executable, '-c', code, *ingest[1:]])}; rc=$?; {q(check)}; exit $rc"
        cmd = ["sh", "-c", script]
    else:
        script = f"mount -t tmpfs -o size=1m tmpfs '{mnt}' && {{ {q(ingest)}; rc=$?; {q(check)}; umount '{mnt}'; exit $rc; }}"
        cmd = ["sh", "-c", script] if mode == "root" else ["unshare", "-rm", "sh", "-c", script]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ENV, timeout=300)
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    out = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("RUNS")]
    assert r.returncode == 1, (mode, r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert err and all(
        ln.startswith("kernelscope: ") and any(str(f) in ln for f in files) for ln in err
    ), (mode, err)
    assert any("No space left on device" in ln or "File too large" in ln for ln in err), (mode, err)
    # every file attempted, one line each
    assert len(out) + len(err) == len(files), (mode, out, err)
    assert out, (mode, "nothing fitted at all")
    # what is stored is whole; no temp left
    assert f"RUNS {len(out)}" in r.stdout, r.stdout
    print(
        f"disk full: {mode} ({'a real 1 MiB tmpfs' if mode != 'rlimit' else 'RLIMIT_FSIZE, EFBIG'})"
    )


def test_8_writers_10_rounds_each_run_once_and_intact(tmp_path):
    root = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.collectors.store_writer", str(root), "rounds", "10"],
            cwd=REPO,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    results = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-1500:] for _, e in results]
    lines = [ln.split() for out, _ in results for ln in out.splitlines()]
    assert len(lines) == 8 * 10 * 3
    ids = check_store(root)
    # the two shared files once, each writer's own 10
    assert len(ids) == 2 + 8 * 10
    created = {}
    for rid, was_new in lines:
        created.setdefault(rid, []).append(was_new == "True")
    assert set(created) == set(ids)
    assert all(sum(v) == 1 for v in created.values()), {
        k: v for k, v in created.items() if sum(v) != 1
    }
