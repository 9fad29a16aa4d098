"""The compatibility corpus (tests/corpus): what it holds, and that every vintage parses or is
refused in one line.

The numbers (kernels, launches, launch delays, idle time) are checked against the references in
tests/dashboard/test_corpus_analyze.py; here: the manifest's promises (files, hashes, licenses,
coverage), each format's quirks on the real files, the trimmer, and the files derived at test time
from real ones (an nsys export without globalPid or GPU table, a details page without its NUMA
section)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sqlite3
import sys

import polars as pl
import pytest

from collectors.errors import ArtifactError
from collectors.ingest import parse_bytes, parse_path, read_path
from tests.conftest import REPO

CORPUS = REPO / "tests" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FILES = [e for e in MANIFEST["files"] if not e.get("set")]
SETS = [e for e in MANIFEST["files"] if e.get("set")]
LICENSES = {"MIT", "BSD-3-Clause", "CC-BY-SA-4.0", "Unlicense", "GPL-3.0-only"}
sys.path.insert(0, str(CORPUS))
import reference as R  # noqa: E402  (tests/corpus/reference.py: standard library only)
import trim_kineto  # noqa: E402


def _entry(fragment: str) -> dict:
    hits = [e for e in MANIFEST["files"] if fragment in e["file"]]
    assert len(hits) == 1, fragment
    return hits[0]


def _parse(fragment: str):
    return parse_path(CORPUS / _entry(fragment)["file"])


# ---------------------------------------------------------------------------------------------- the
# manifest
@pytest.mark.parametrize("e", FILES, ids=lambda e: e["file"])
def test_every_file_is_as_the_manifest_says(e):
    data = (CORPUS / e["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == e["sha256"] and len(data) == e["bytes"]
    assert e["license"] in LICENSES and (CORPUS / e["license_file"]).read_text().strip()
    assert (
        e["source_repo"]
        and e["path"]
        and e["stored_as"]
        and e["expected"]["outcome"] in ("analysed", "refused")
    )
    if "constructed" not in e["file"]:
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]) and re.fullmatch(
            r"[0-9a-f]{64}", e["upstream_sha256"]
        )


def test_the_corpus_covers_what_the_issue_asks():
    real = [
        e for e in FILES if "constructed" not in e["file"] and not e.get("export_of")
    ]  # public files only
    sources = {e["source_repo"] for e in real}
    assert len(real) >= 40 and len(sources) >= 8, (len(real), len(sources))
    by_fmt = {
        f: [e for e in real if e["format"] == f]
        for f in ("kineto", "nsys-sqlite", "ncu-rep", "ncu-csv-details")
    }
    # Nsight Compute reports of (at least) four versions, named in the reports themselves
    ncu_versions = {
        m.group(0)
        for e in by_fmt["ncu-rep"]
        for m in [re.search(r"20\d\d\.\d(\.\d)?", e["producer"])]
        if m
    }
    assert len(ncu_versions) >= 4, ncu_versions
    # nsys exports of four or more versions, as each export's metadata says
    nsys_versions = {_parse(e["file"]).meta.get("nsys_version") for e in by_fmt["nsys-sqlite"]}
    assert len(nsys_versions - {None}) >= 4, nsys_versions
    # Kineto: PyTorch 1.8 and 1.9, five or more versions, a multi-rank set, AMD
    torch = {
        m.group(1)
        for e in by_fmt["kineto"]
        for m in re.finditer(r"PyTorch ~?(\d\.\d+)", e["producer"] or "")
    }
    assert {"1.8", "1.9"} <= torch and len(torch) >= 5, torch
    assert any(s["file"] == "param/dlrm_8rank" for s in SETS)
    assert (
        sum("amd" in e["file"] or "mi" in e["file"].split("/")[1][:2] for e in by_fmt["kineto"])
        >= 5
    )
    # details-page CSVs of several vintages (the raw page: see the manifest's not_included)
    assert len(by_fmt["ncu-csv-details"]) >= 5
    # our raw and details exports of every public report that analyses, each said to be ours and
    # sourced as it
    exports = [e for e in FILES if e.get("export_of")]
    assert {_entry(e["export_of"])["source_repo"] for e in exports} == {
        e["source_repo"] for e in by_fmt["ncu-rep"] if e["expected"]["outcome"] == "analysed"
    }  # every source
    per_report: dict[str, list[str]] = {}
    for e in exports:
        per_report.setdefault(e["export_of"], []).append(e["format"])
    assert all(sorted(f) == ["ncu-csv-details", "ncu-csv-raw"] for f in per_report.values()), (
        per_report
    )
    for e in exports:
        rep = _entry(e["export_of"])
        assert (
            "OUR EXPORT" in e["stored_as"]
            and "2025.3.1" in e["producer"]
            and e["format"] in ("ncu-csv-raw", "ncu-csv-details")
        )
        assert [e[k] for k in ("source_repo", "commit", "path", "license", "upstream_sha256")] == [
            rep[k] for k in ("source_repo", "commit", "path", "license", "upstream_sha256")
        ]


# ----------------------------------------------------------------------------------------------
# every file
@pytest.mark.parametrize("e", FILES + SETS, ids=lambda e: e["file"])
def test_every_file_parses_or_is_refused_in_one_line(e):
    data, name = read_path(CORPUS / e["file"])
    want = e["expected"]
    try:
        parsed = parse_bytes(data, name)
    except ArtifactError as err:
        assert want["outcome"] == "refused" and want["problem"] in err.problem, err.problem
        assert "\n" not in str(err) and str(err).startswith(name)
        return
    assert parsed.meta["item_count"] >= 0 and isinstance(parsed.meta["lacks"], list)
    if want.get("warning"):
        assert any(want["warning"] in w for w in parsed.meta["warnings"]), parsed.meta["warnings"]


def test_every_kind_of_refusal_names_what_to_do():
    with pytest.raises(
        ArtifactError,
        match=r"Nsight Systems timeline converted to Chrome JSON.*nsys export --type sqlite",
    ):
        _parse("chrome.trimmed")
    bogus = json.dumps(
        [{"ph": "X", "cat": "Function", "name": "f", "ts": 1, "dur": 2}] * 3
    ).encode()
    with pytest.raises(
        ArtifactError, match=r"not a PyTorch profiler \(Kineto\) trace.*torch.profiler"
    ):
        parse_bytes(bogus, "browser.json")
    with pytest.raises(
        ArtifactError, match="incomplete collection"
    ):  # its one launch's duration is NaN
        _parse("profileHIGGS")


# ----------------------------------------------------------------------------------------------
# Kineto vintages
def test_pytorch_1_8_traces_match_their_launches_and_ops():
    p = _parse("resnet50_nw0_2021-01")
    g = p.tables["gpu_ops"].filter(pl.col("kind") == "kernel")
    assert g.height == 9564 and g["launch_api"].is_not_null().sum() == 8856
    assert set(g["launch_api"].drop_nulls().unique()) == {"cudaLaunchKernel"}
    # the lower-case "external id" links kernels to their aten op
    assert g["op_name"].is_not_null().sum() > 8000 and "aten::cudnn_convolution" in set(
        g["op_name"].drop_nulls()
    )
    assert any("PyTorch <= 1.9" in x for x in p.meta["lacks"]) and any(
        "whole µs" in x for x in p.meta["lacks"]
    )


def test_compute_properties_name_the_gpu_of_pytorch_1_8_traces():
    p = _parse("computeProperties")
    assert p.meta["gpu_name"] == "Tesla V100-DGXS-32GB" and p.meta["devices"][0]["sm_count"] == 80
    assert p.meta["devices"][0]["source"] == "computeProperties"
    assert not any("GPU description" in x for x in p.meta["lacks"])
    bare = _parse("bare-list")  # a bare event list, no GPU description at all
    assert bare.meta["gpu_name"] is None and any("GPU description" in x for x in bare.meta["lacks"])


def test_kineto_times_are_exact_ns_of_the_printed_digits():
    """1712195495705754.8 µs is not a float64 (the nearest is ...754.75): the parser keeps the 800 ns."""
    from decimal import Decimal

    e = _entry("v100_ns_resolution")
    p = _parse("v100_ns_resolution")
    doc = json.loads(gzip.decompress((CORPUS / e["file"]).read_bytes()), parse_float=Decimal)
    ts = [x["ts"] for x in doc["traceEvents"] if x.get("cat") in R.K_GPU and x.get("ph") == "X"]
    exact = sorted(R._ns(t) for t in ts)
    assert p.tables["gpu_ops"]["start_ns"].sort().to_list() == exact
    through_float = sorted(round(float(t) * 1000) for t in ts)
    assert (
        sum(a != b for a, b in zip(exact, through_float)) > len(ts) // 2
    )  # what a float64 reader gets wrong


def test_hip_graph_launch_is_a_graph_launch():
    g = _parse("vllm_decode_hipgraph").tables["gpu_ops"].filter(pl.col("kind") == "kernel")
    graph = g.filter(pl.col("launch_api") == "hipGraphLaunch")
    assert graph.height == 421 and graph["graph_launch_correlation"].null_count() == 0
    assert graph["launch_delay_ns"].null_count() == 421 and graph["queue_ns"].null_count() < 421
    own = g.filter(pl.col("graph_launch_correlation").is_null())
    assert own["launch_delay_ns"].null_count() == 0 and set(own["launch_api"]) <= {
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
    }


def test_traces_without_gpu_activity_say_why():
    cupti = _parse("cupti_profiler_counters")
    assert cupti.meta["item_count"] == 0
    assert any(
        "77 cuda_profiler_range events are CUPTI range-profiler counters" in w
        for w in cupti.meta["warnings"]
    )
    cpu = _parse("cpu_only_gloo")
    assert any("CPU-only profile" in w for w in cpu.meta["warnings"])


# ----------------------------------------------------------------------------------------------
# nsys vintages
def _without(src_fragment: str, tmp_path, sql: list[str]) -> bytes:
    """A real export with columns or tables removed (an older or trimmed nsys schema), as bytes."""
    db = tmp_path / "x.sqlite"
    db.write_bytes(gzip.decompress((CORPUS / _entry(src_fragment)["file"]).read_bytes()))
    con = sqlite3.connect(db)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return db.read_bytes()


def test_nsys_without_global_pid_or_gpu_table_is_read_and_says_so(tmp_path):
    full = _parse("test-cuda/report1").tables["gpu_ops"]
    data = _without(
        "test-cuda/report1",
        tmp_path,
        [
            f"ALTER TABLE {t} DROP COLUMN globalPid"
            for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
        ]
        + ["DROP TABLE TARGET_INFO_GPU"],
    )
    p = parse_bytes(data, "no_gpid.sqlite")
    g = p.tables["gpu_ops"]
    # one process: its ops are attributed to it, every launch is still found, the numbers are the
    # same
    assert (
        g.height == full.height and g["launch_api"].null_count() == full["launch_api"].null_count()
    )
    assert g["launch_delay_ns"].to_list() == full["launch_delay_ns"].to_list()
    assert p.meta["gpu_name"] is None
    assert any("globalPid" in x for x in p.meta["lacks"]) and any(
        "TARGET_INFO_GPU" in x for x in p.meta["lacks"]
    )
    from dashboard.cli.timeline import report
    from dashboard.core.source import Source
    from collectors.store import Store

    rep = report(Source(Store(tmp_path / "s")).trace(p))  # the summary once died on int(None)
    assert rep["summary"]["kernel_count"] == 4 and rep["summary"]["kernels_with_launch"] == 4


def test_nsys_2022_exports_name_their_version_in_the_old_metadata_table():
    p = _parse("saxpy-mpi-cuda")
    assert p.meta["nsys_version"] == "2022.2.1.31" and p.meta["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    multi = _parse("perlmutter-cloverleaf")  # four GPUs in TARGET_INFO_GPU, kernels on device 0
    assert multi.meta["gpu_name"] == "NVIDIA A100-SXM4-80GB" and len(multi.meta["devices"]) == 4


# ---------------------------------------------------------------------------------------------- ncu
# vintages
def test_old_details_layout_reads_like_its_report():
    """The 2019.5-2021.1 details layout (section "GPU Speed Of Light", Duration in nsecond, a
    "Kernel Time" column, no CC) gives the durations, names and occupancy of the report it was made
    from."""
    csv_ = _parse("old-details-layout").tables["kernels"]
    rep = _parse("physicell-fork/profile.nsight-cuprof-report").tables["kernels"]
    assert csv_.height == rep.height == 30
    assert csv_["kernel_name"].to_list() == rep["kernel_name"].to_list()
    assert csv_["duration_ns"].to_list() == rep["duration_ns"].to_list()
    assert csv_["dram_clock_hz"].to_list() == pytest.approx(
        rep["dram_clock_hz"].to_list(), abs=0.005
    )
    assert csv_["theoretical_occupancy_pct"].to_list() == pytest.approx(
        rep["theoretical_occupancy_pct"].to_list(), abs=0.005
    )


def test_old_report_container_is_read():
    p = _parse("profile.nsight-cuprof-report")
    assert p.meta["source_format"] == "ncu-rep" and p.meta["gpu_name"] == "Tesla V100-PCIE-16GB"
    assert p.tables["kernels"].height == 30


def test_cc_table_agrees_with_every_device_description_of_the_corpus():
    """The per-CC limits (analyzers.gpus.CC_LIMITS) against what real devices reported: ncu device
    attributes, Kineto computeProperties / deviceProperties, nsys TARGET_INFO_GPU."""
    from analyzers.gpus import CC_LIMITS

    seen = set()
    for e in FILES:
        if e["format"] != "ncu-rep" or e["expected"]["outcome"] != "analysed":
            continue
        a = _parse(e["file"]).meta["device_attributes"]
        cc = (a["compute_capability_major"], a["compute_capability_minor"])
        lim = CC_LIMITS[cc]
        assert a["max_threads_per_multiprocessor"] == lim["max_threads_per_sm"], e["file"]
        assert a["max_shared_memory_per_multiprocessor"] == lim["smem_per_sm_bytes"], e["file"]
        assert a["max_shared_memory_per_block_optin"] == lim["smem_per_block_optin_bytes"], e[
            "file"
        ]
        assert a["max_registers_per_multiprocessor"] == lim["regs_per_sm"], e["file"]
        if "reserved_shared_memory_per_block" in a:
            assert a["reserved_shared_memory_per_block"] == lim["reserved_smem_per_block_bytes"], e[
                "file"
            ]
        seen.add(cc)
    v100 = _parse("computeProperties").meta["devices"][0]
    assert (
        v100["smem_per_sm_bytes"],
        v100["smem_per_block_optin_bytes"],
        v100["max_threads_per_sm"],
    ) == (
        CC_LIMITS[(7, 0)]["smem_per_sm_bytes"],
        CC_LIMITS[(7, 0)]["smem_per_block_optin_bytes"],
        2048,
    )
    t4 = _parse("power_iteration__baseline.sqlite").meta["devices"][0]
    assert (
        t4["cc_major"],
        t4["cc_minor"],
        t4["smem_per_sm_bytes"],
        t4["smem_per_block_optin_bytes"],
    ) == (
        7,
        5,
        CC_LIMITS[(7, 5)]["smem_per_sm_bytes"],
        CC_LIMITS[(7, 5)]["smem_per_block_optin_bytes"],
    )
    assert {(7, 0), (8, 0), (8, 6)} <= seen


# ---------------------------------------------------------------------------------------------- the
# trimmer
def test_trimmer_keeps_a_window_and_every_kept_kernels_launch():
    src = CORPUS / _entry("a100_param_alexnet")["file"]
    doc = trim_kineto._load(src.read_bytes())
    ref_all = R.kineto_ops(json.loads(json.dumps(doc)))
    starts = sorted(o["start"] for o in ref_all)
    skip, window = (
        (starts[30] - starts[0]) / 1e3,
        (starts[60] - starts[30]) / 1e3,
    )  # µs; about 30 ops
    out = trim_kineto.trim(doc, window_us=window, skip_us=skip)
    kept = R.kineto_ops(json.loads(json.dumps(out)))
    lo, hi = starts[30], starts[60]  # ns, exactly
    inside = [o for o in ref_all if lo <= o["start"] and o["end"] <= hi]
    assert 0 < len(kept) < len(ref_all) and sorted(o["start"] for o in kept) == sorted(
        o["start"] for o in inside
    )
    launched = {o["start"] for o in inside if o["launched"]}
    assert {
        o["start"] for o in kept if o["launched"]
    } == launched  # no kept op lost its launch call
    assert {k: out[k] for k in out if k != "traceEvents"} == {
        k: doc[k] for k in doc if k != "traceEvents"
    }
    assert trim_kineto.dump_gzip(out) == trim_kineto.dump_gzip(trim_kineto.trim(doc, window, skip))
    p = parse_bytes(
        trim_kineto.dump_gzip(out), "trimmed.json.gz"
    )  # and it is still a trace we read
    assert p.meta["counts"]["gpu_ops"] == len(kept)


@pytest.mark.parametrize("e", [e for e in FILES if e.get("trimmed")], ids=lambda e: e["file"])
def test_trimmed_files_say_how_they_were_made(e):
    assert "trim_kineto.py" in e["stored_as"] and e["upstream_sha256"] != e["sha256"]
