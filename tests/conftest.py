"""Shared fixtures: sample paths, an isolated store, GPU and shared-data markers."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The suite runs with HOME in a temporary folder (set here, before any test module imports the
# project), so no test, subprocess or server it starts writes into the user's own ~/.kernelscope;
# pytest_sessionfinish checks the real one.


def _imported_by_pytest() -> bool:
    """Whether pytest itself is importing this module (its processes, xdist's workers included), not
    a helper script a test started (tests/collectors/store_writer.py, the fuzz worker)."""
    f = sys._getframe(1)
    while f is not None:
        if f"{os.sep}_pytest{os.sep}" in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


# a helper keeps the home it inherited instead of leaving a new one behind in the temporary folder
_INHERITED = None if _imported_by_pytest() else os.environ.get("KS_TEST_HOME")
REAL_HOME = Path(os.path.expanduser("~")).resolve()
_TEST_HOME = Path(_INHERITED or tempfile.mkdtemp(prefix="ks-test-home-"))
os.environ["HOME"] = os.environ["KS_TEST_HOME"] = str(_TEST_HOME)
os.environ.pop("KERNELSCOPE_STORE", None)


def _home_state() -> dict[str, float]:
    """Every file under the real ~/.kernelscope with its modification time."""
    root = REAL_HOME / ".kernelscope"
    return {str(p): p.stat().st_mtime for p in root.rglob("*")} if root.exists() else {}


_HOME_BEFORE = _home_state()


def pytest_sessionfinish(session, exitstatus):
    after = _home_state()
    changed = sorted(
        k for k in set(after) | set(_HOME_BEFORE) if after.get(k) != _HOME_BEFORE.get(k)
    )
    shutil.rmtree(_TEST_HOME, ignore_errors=True)
    if changed:
        session.exitstatus = 1
        print(
            f"\nFAILED: the tests wrote under the real home's .kernelscope ({len(changed)} paths, "
            f"e.g. {changed[:3]}); every test must stay in its temporary folders"
        )


REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
H200_KERNELS = SAMPLES / "h200" / "chapter5_kernels"
H200_TORCH = SAMPLES / "h200" / "torch_ffn"
SHARED = REPO.parent / "shared"
SHARED_NSYS = SHARED / "data" / "nsys"


def _has_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return n > 0
    except Exception:  # noqa: BLE001 - any NVML failure means: no usable GPU here
        return False


#: the modules whose tests take longest (`--durations` of the CI runs), longest first: they run
#: first, so that with `pytest -n --dist load` (./ks test) the last minutes are not one worker
#: finishing a long test alone
SLOW_FIRST = (
    "tests/e2e/test_real_workload_layout.py",
    "tests/fuzz/",
    "tests/e2e/",
    "tests/analyzers/test_kernel_models_real.py",
    "tests/collectors/test_hardening.py",
    "tests/collectors/test_kineto_scan.py",
    "tests/collectors/test_store_robustness.py",
    "tests/collectors/test_ncu_source_and_delete.py",
    "tests/collectors/test_store.py",
    "tests/dashboard/test_multirank_cli.py",
    "tests/dashboard/test_threads.py",
    "tests/dashboard/test_corpus_analyze.py",
    "tests/analyzers/test_steps_real.py",
    "tests/dashboard/test_server_hardening.py",
)


def _slowness(nodeid: str) -> int:
    return next((i for i, p in enumerate(SLOW_FIRST) if nodeid.startswith(p)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config, items):
    # a stable sort on the module alone: every worker collects the same order, and tests keep
    # their order within a module
    items.sort(key=lambda item: _slowness(item.nodeid))
    gpu = _has_gpu()
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_shared = pytest.mark.skip(reason=f"{SHARED_NSYS} is absent")
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if "shared_data" in item.keywords and not SHARED_NSYS.is_dir():
            item.add_marker(skip_shared)


@pytest.fixture(scope="session", autouse=True)
def _ncu_report_cache(tmp_path_factory):
    """Each recorded .ncu-rep is read once per session, by every worker (tests.support.report_cache)."""
    from tests.support.report_cache import install

    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist each worker has its own base folder inside the session's
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with pytest.MonkeyPatch.context() as mp:
        install(mp, shared / "ncu-rep-reads")
        yield


@pytest.fixture
def store(tmp_path, monkeypatch):
    from collectors.store import Store

    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    return Store(tmp_path / "store")


def store_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under a store with its bytes, to assert that nothing changed."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
