"""Shared fixtures: sample paths, an isolated store, GPU and shared-data markers."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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


def pytest_collection_modifyitems(config, items):
    gpu = _has_gpu()
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_shared = pytest.mark.skip(reason=f"{SHARED_NSYS} is absent")
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if "shared_data" in item.keywords and not SHARED_NSYS.is_dir():
            item.add_marker(skip_shared)


@pytest.fixture
def store(tmp_path, monkeypatch):
    from collectors.store import Store
    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    return Store(tmp_path / "store")


def store_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under a store with its bytes, to assert that nothing changed."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
