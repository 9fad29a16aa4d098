"""The dashboard with files of other vintages: the Upload page's GPU picker for files that do not
name their GPU, and the warnings a run is stored with on the Runs, Kernels and Timeline pages."""

from __future__ import annotations

import pytest

from collectors.store import Store
from tests.conftest import REPO
from tests.dashboard.helpers import frames, open_page, texts

CORPUS = REPO / "tests" / "corpus"
OLD_CSV = CORPUS / "physicell-fork" / "profile.old-details-layout.constructed.csv.gz"
T4_CSV = CORPUS / "nsightful" / "copy_blocked.csv"
CPU_ONLY = CORPUS / "hta" / "cpu_only_gloo_rank34_2024-07.pt.trace.json.gz"


@pytest.fixture
def root(tmp_path, monkeypatch):
    from dashboard.web import store_access

    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "no_samples"))
    monkeypatch.setenv("KERNELSCOPE_FAKE_NVML", "1")
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    store_access.clear_caches()
    yield tmp_path / "store"
    store_access.clear_caches()


def test_upload_with_the_gpu_picker(root):
    at = open_page("upload")
    at.file_uploader[0].set_value([(OLD_CSV.name, OLD_CSV.read_bytes(), "application/gzip")]).run()
    assert not at.exception
    err = " ".join(e.value for e in at.error)
    assert "no GPU identified" in err and "--gpu" in err and "Nothing was stored" in err
    assert not Store(root).runs()
    at.selectbox[0].select("NVIDIA Tesla V100 PCIe 16GB").run()
    ok = [s.value for s in at.success]
    assert len(ok) == 1 and "new" in ok[0]
    run = Store(root).runs()[0]
    assert (
        run.manifest["gpu_override"] == "NVIDIA Tesla V100 PCIe 16GB"
        and run.meta["gpu_name"] == run.manifest["gpu_override"]
    )


def test_pages_show_how_the_gpu_was_identified_and_the_warnings(root):
    from dashboard.core.source import Source

    src = Source(Store(root))
    t4 = src.ingest_path(T4_CSV)[0]
    cpu = src.ingest_path(CPU_ONLY)[0]
    at = open_page("kernels", run=t4.run_id)
    assert not at.exception
    t = texts(at)
    assert "GPU identified: NVIDIA T4: inferred" in t and "lacks the GPU's name" in t
    assert any("GPU inferred from CC 7.5, 40 SMs" in w.value for w in at.warning)
    at = open_page("timeline", run=cpu.run_id)
    assert not at.exception
    assert any("no GPU activity" in w.value for w in at.warning)
    at = open_page("runs")
    runs = frames(at)[0]
    row = runs.filter(runs["run_id"] == cpu.run_id).row(0, named=True)
    assert "no GPU activity" in row["warnings"]
