"""The whole compatibility corpus through `ingest` and `analyze`: the same files accepted by both,
every number equal to its reference (tests/corpus/reference.py, standard library only) and to the
sources' own numbers, or the definitional difference computed and shown.

Runs in seconds (the corpus is about 10 MB, trimmed where large: tests/corpus/README.md)."""

from __future__ import annotations

import json
import sys

import polars as pl
import pytest

from analyzers import timeline
from collectors.errors import ArtifactError
from collectors.ingest import parse_path
from collectors.store import Store
from dashboard.core.source import Source
from tests.conftest import REPO

CORPUS = REPO / "tests" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ENTRIES = MANIFEST["files"]
sys.path.insert(0, str(CORPUS))
import reference as R  # noqa: E402


def _entry(fragment: str) -> dict:
    hits = [e for e in ENTRIES if fragment in e["file"]]
    assert len(hits) == 1, fragment
    return hits[0]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Every corpus entry ingested into one store (as `kernelscope ingest` does): file -> Run or ArtifactError."""
    src = Source(Store(tmp_path_factory.mktemp("corpus") / "store"))
    out = {}
    for e in ENTRIES:
        try:
            out[e["file"]] = src.ingest_path(CORPUS / e["file"])[0]
        except ArtifactError as err:
            out[e["file"]] = err
    return src, out


def _summary(src: Source, run) -> dict:
    r = src.trace(run).summary.run
    return {
        "kernels": r["kernel_count"],
        "kernels_with_launch": r["kernels_with_launch"],
        "launch_delay_median_ns": r["launch_delay_median_ns"],
        "busy_ns": r["gpu_busy_ns"],
        "window_ns": r["gpu_window_ns"],
        "memcpy": r["memcpy_count"],
        "memset": r["memset_count"],
    }


@pytest.mark.parametrize("e", ENTRIES, ids=lambda e: e["file"])
def test_ingest_and_analyze_accept_the_same_files_and_give_the_reference_numbers(stored, e):
    src, runs = stored
    want = e["expected"]
    got = runs[e["file"]]
    # analyze of the file (parsed in memory) agrees with ingest: both refuse, with the same one
    # line, or both work
    try:
        parsed = parse_path(CORPUS / e["file"])
        src.check(parsed, e["file"])
        analysed = True
    except ArtifactError as err:
        analysed = False
        assert isinstance(got, ArtifactError) and got.problem == err.problem
        assert want["outcome"] == "refused" and want["problem"] in err.problem
    if not analysed:
        return
    assert want["outcome"] == "analysed" and not isinstance(got, ArtifactError), got
    # a stored run analyses (nothing is stored and then refused), and gives what the file gives
    src.analysis(got)
    ref = want.get("reference")
    # the frozen numbers are the reference's, today (recomputed here for the files under 300 kB; all
    # of them: `python tests/corpus/reference.py --manifest`, a few seconds more)
    small = e.get("set") or (CORPUS / e["file"]).stat().st_size < 300_000
    live = R.reference_for(str(CORPUS / e["file"]), e["format"]) if small else None
    if ref is not None and live is not None:
        assert {k: live[k] for k in ref} == ref
    if e["format"] in ("kineto", "nsys-sqlite"):
        assert _summary(src, got) == ref
        assert _summary(src, parsed) == ref
    elif ref is not None:
        k = src.ncu(got).kernels
        assert k.height == ref["launches"] and k["duration_ns"].to_list() == ref["durations_ns"]


def test_the_constructed_old_details_page_needs_and_takes_gpu(tmp_path):
    e = _entry("old-details-layout")
    src = Source(Store(tmp_path / "s"))
    with pytest.raises(ArtifactError, match="no GPU identified"):
        src.ingest_path(CORPUS / e["file"])
    assert not src.runs()  # nothing was stored
    run, created = src.ingest_path(CORPUS / e["file"], gpu=e["expected"]["with_gpu"])
    assert created and run.manifest["gpu_override"] == "NVIDIA Tesla V100 PCIe 16GB"
    a = Source(Store(tmp_path / "s")).ncu(run.run_id)
    assert a.gpu.name == "NVIDIA Tesla V100 PCIe 16GB" and "--gpu" in a.gpu_how
    assert a.kernels["duration_ns"].to_list() == e["expected"]["reference"]["durations_ns"]
    assert a.kernels["predicted_occupancy_pct"].null_count() == 0  # the CC 7.0 rules apply


# ------------------------------------------------------------------------------------ the sources'
# own numbers
@pytest.mark.parametrize("fragment", ["resnet50_nw0_2021-01", "resnet50_nw0_2021-06"])
def test_tensorboard_plugin_kernel_tables(stored, fragment):
    """tb_plugin's end-to-end test serves these kernel tables byte for byte: calls and total µs per kernel name."""
    src, runs = stored
    e = _entry(fragment)
    table = e["source_numbers"]["kernel_table_us"]
    s = timeline.kernel_summary(src.table(runs[e["file"]].run_id, "gpu_ops"))
    ours = {n: [c, t / 1000] for n, c, t in s.select("name", "count", "total_ns").iter_rows()}
    assert {n: ours[n] for n in table} == {n: [c, float(t)] for n, (c, t) in table.items()}
    assert set(ours) == set(table)


def _float_us_timeline(path) -> tuple[float, float]:
    """TraceLens' way: GPU ops' ts and ts + dur as float64 µs, their union and first-to-last span [ms]."""
    doc = json.loads(R.read(str(path)))
    iv = sorted(
        (float(x["ts"]), float(x["ts"]) + float(x["dur"]))
        for x in doc["traceEvents"]
        if x.get("cat") in R.K_GPU and x.get("ph") == "X"
    )
    busy, cs, ce = 0.0, None, None
    for s_, e_ in iv:
        if ce is None or s_ > ce:
            if ce is not None:
                busy += ce - cs
            cs, ce = s_, e_
        else:
            ce = max(ce, e_)
    busy += ce - cs
    return busy / 1e3, (max(e_ for _, e_ in iv) - min(s_ for s_, _ in iv)) / 1e3


@pytest.mark.parametrize(
    "fragment",
    [
        "h100_bert",
        "mi300x_bert",
        "mi210_gpu_only",
        "torch_compile_triton",
        "vllm_decode_hipgraph",
        "sglang_qwen3",
    ],
)
def test_tracelens_gpu_timeline_and_kernel_summary(stored, fragment):
    """TraceLens' busy time (union of GPU ops) and total time (first start to last end): computed as
    TraceLens does, in float64 µs, they equal its report exactly; Kernelscope's exact-ns numbers
    differ from them by float64 rounding only (shown, and bounded by 2 ns per op)."""
    src, runs = stored
    e = _entry(fragment)
    n = e["source_numbers"]
    busy_f, total_f = _float_us_timeline(CORPUS / e["file"])
    assert (busy_f, total_f) == (
        n["gpu_timeline_ms"]["busy_time"],
        n["gpu_timeline_ms"]["total_time"],
    )
    r = src.trace(runs[e["file"]]).summary.run
    assert (r["gpu_busy_ns"], r["gpu_window_ns"]) == (
        e["expected"]["reference"]["busy_ns"],
        e["expected"]["reference"]["window_ns"],
    )
    diff_ns = r["gpu_busy_ns"] - busy_f * 1e6
    ops = src.table(runs[e["file"]].run_id, "gpu_ops").height
    print(
        f"{fragment}: busy {r['gpu_busy_ns']} ns exact vs TraceLens {busy_f * 1e6:.1f} ns (float64 "
        f"µs): {diff_ns:+.1f} ns over {ops} ops"
    )
    assert abs(diff_ns) <= 2 * ops and abs(r["gpu_window_ns"] - total_f * 1e6) <= 2
    if "kernel_count_sum" in n:
        k = src.table(runs[e["file"]].run_id, "gpu_ops").filter(pl.col("kind") == "kernel")
        assert k.height == n["kernel_count_sum"]
        assert k["duration_ns"].sum() / 1e3 == pytest.approx(n["kernel_time_sum_us"], abs=1e-3)


def test_hta_nccl_kernel_count(stored):
    src, runs = stored
    e = _entry("a100_resnet_ddp")
    k = src.table(runs[e["file"]].run_id, "gpu_ops").filter(pl.col("kind") == "kernel")
    assert (
        k.filter(pl.col("name").str.contains("ncclKernel")).height
        == e["source_numbers"]["nccl_kernels"]
        == 21
    )


def test_pipit_and_nsightful_golden_numbers(stored):
    src, runs = stored
    e = _entry("perlmutter-cloverleaf")
    n = e["source_numbers"]
    g = src.table(runs[e["file"]].run_id, "gpu_ops")
    k = g.filter(pl.col("kind") == "kernel")
    assert (k.height, int(k["duration_ns"].sum())) == (n["kernels"], n["kernel_total_ns"])
    assert g.filter(pl.col("copy_kind") == "HtoD").height == n["memcpy_htod"]
    assert g.filter(pl.col("copy_kind") == "DtoH").height == n["memcpy_dtoh"]
    e = _entry("power_iteration__baseline.sqlite")
    k = src.table(runs[e["file"]].run_id, "gpu_ops").filter(pl.col("kind") == "kernel")
    assert k.height == e["source_numbers"]["kernels"]
    assert k["duration_ns"].sum() / 1e3 == pytest.approx(
        e["source_numbers"]["kernel_total_us"], abs=1e-3
    )


def test_superbenchmark_and_llm_perf_opt_ncu_numbers(stored):
    src, runs = stored
    a = src.ncu(runs[_entry("cublaslt_ncu").get("file")])
    assert (
        a.kernels["dram_throughput_pct"][0]
        == _entry("cublaslt_ncu")["source_numbers"]["dram_throughput_pct"]
    )
    for f in ("kernel_0001", "kernel_0003"):
        e = _entry(f)
        n = e["source_numbers"]
        row = src.ncu(runs[e["file"]]).kernels.row(0, named=True)
        assert row["duration_ns"] / 1e3 == pytest.approx(n["duration_us"], abs=1e-9)
        assert row["achieved_occupancy_pct"] == pytest.approx(n["achieved_occupancy_pct"], abs=1e-9)
        assert row["theoretical_occupancy_pct"] == pytest.approx(
            n["theoretical_occupancy_pct"], abs=1e-9
        )
        assert row["dram_throughput_pct"] == pytest.approx(n["dram_throughput_pct"], abs=1e-9)
        assert row["sm_throughput_pct"] == pytest.approx(n["sm_throughput_pct"], abs=1e-9)


# ------------------------------------------------------------------------------------ GPU
# identification
@pytest.mark.parametrize(
    "fragment, want, inferred",
    [
        ("copy_blocked.csv", "NVIDIA T4", True),  # CC 7.5 + 40 SMs
        (
            "cublaslt_ncu.log",
            "unknown GPU (CC 10.0, 152 SMs)",
            False,
        ),  # no registry GPU has 152 SMs
        # CC alone does not identify a part
        ("metrics.csv", "unknown GPU (CC 8.6)", False),
        ("kernel_0001", "unknown GPU (CC 12.0)", False),
        (
            "MW_Baseline.ncu-rep",
            "NVIDIA Tesla V100 SXM2 32GB",
            False,
        ),  # named by its device attributes
        # not in the registry: from the attributes
        ("indexspaces-jl/profile.ncu-rep", "NVIDIA A40", False),
    ],
)
def test_gpu_identified_from_what_the_file_has(stored, fragment, want, inferred):
    src, runs = stored
    ident = src.identify(runs[_entry(fragment)["file"]])
    assert ident.spec.name == want and ident.inferred == inferred
    if not ident.spec.from_registry and "unknown" in want:
        assert (
            ident.warning
            and "--gpu" in ident.warning
            and ident.spec.dram_bandwidth_bytes_per_s is None
        )


# ------------------------------------------------------------------------------------ the command
# line
def test_cli_refuses_in_one_line_and_never_with_a_traceback(tmp_path, capsys):
    from dashboard.cli import main

    for fragment in ("chrome.trimmed", "profileHIGGS", "old-details-layout"):
        f = CORPUS / _entry(fragment)["file"]
        for cmd in (["analyze", str(f)], ["ingest", str(f), "--store", str(tmp_path / "s")]):
            assert main(cmd) == 1
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("kernelscope: ") and f.name in err[0], err
    assert not Store(tmp_path / "s").runs()


def test_cli_analyze_prints_gpu_evidence_warnings_and_lacks(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(CORPUS / _entry("copy_blocked.csv")["file"])]) == 0
    out = capsys.readouterr().out
    assert "GPU NVIDIA T4: inferred, the only registry GPU with CC 7.5, 40 SMs" in out
    assert (
        "warning: GPU inferred from CC 7.5, 40 SMs" in out
        and "the file lacks the GPU's name" in out
    )
    assert main(["analyze", str(CORPUS / _entry("cpu_only_gloo")["file"])]) == 0
    assert "warning: no GPU activity" in capsys.readouterr().out
    assert (
        main(
            [
                "analyze",
                str(CORPUS / _entry("old-details-layout")["file"]),
                "--gpu",
                "V100 PCIe 16GB",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert (
        rep["gpu"]["name"] == "NVIDIA Tesla V100 PCIe 16GB"
        and rep["lacks"]
        and rep["kernels"][0]["raw_name"]
    )
    assert (
        main(["analyze", str(CORPUS / _entry("copy_blocked.csv")["file"]), "--gpu", "Radeon 7900"])
        == 1
    )
    assert "no GPU 'Radeon 7900'" in capsys.readouterr().err


def test_ingest_of_the_whole_corpus_folder(tmp_path, capsys):
    """`kernelscope ingest tests/corpus`: rank folders become one run each, the expected refusals
    are named, everything else is stored, and `runs` lists the warnings."""
    from dashboard.cli import main

    store = tmp_path / "s"
    assert main(["ingest", str(CORPUS), "--store", str(store)]) == 1  # four files are refused
    out, err = capsys.readouterr()
    refused = [ln for ln in err.splitlines() if ln.startswith("kernelscope: ")]
    assert len(refused) == 4  # the 2019 Jetson report without durations among them
    stored_lines = [ln for ln in out.splitlines() if ln.count("\t") == 3]
    assert any(ln.endswith("dlrm_8rank\tnew") for ln in stored_lines)
    runs = Store(store).runs()
    assert len(runs) == len(stored_lines)
    assert main(["runs", "--store", str(store)]) == 0
    assert "warning: no GPU activity" in capsys.readouterr().out


# ------------------------------------------------------------------------------------
# HTA-comparable numbers
def test_hta_compat_shows_what_hta_leaves_out_and_its_rounding(stored):
    from analyzers.hta_compat import compare, hta_launch_stats

    src, runs = stored
    # a whole-µs trace (PyTorch 2.1, V100): HTA's rounding changes nothing
    g = src.table(runs[_entry("worker1_step_12")["file"]].run_id, "gpu_ops")
    c = compare(g)[0]
    assert c["difference"]["rounding_effect_on_median_us"] == 0
    assert c["difference"]["kernels_left_out_by_hta"]["no launch call in the trace"] == 310 - 246
    # a ns-resolution trace: rounding inward to whole µs adds idle time, and shifts the launch delay
    run = runs[_entry("v100_ns_resolution")["file"]]
    c = compare(src.table(run.run_id, "gpu_ops"), int(run.meta.get("base_time_ns") or 0))[0]
    assert c["hta"]["idle_fraction"] > c["kernelscope"]["idle_fraction"]
    assert c["difference"]["idle_fraction_hta_minus_kernelscope"] == pytest.approx(
        c["hta"]["idle_fraction"] - c["kernelscope"]["idle_fraction"]
    )
    # HIP graph replays: HTA joins none of them (its launch list is CUDA's), Kernelscope matches all
    # 425
    g = src.table(runs[_entry("vllm_decode_hipgraph")["file"]].run_id, "gpu_ops")
    assert hta_launch_stats(g).height == 0
    c = compare(g)[0]
    assert c["kernelscope"]["kernels_with_launch"] == 425 and c["hta"]["kernels_with_launch"] == 0
    assert c["difference"]["kernels_left_out_by_hta"]["graph launch"] == 421


def test_hta_compat_on_a_hand_checked_example():
    """Two kernels, ns-resolution times in µs: HTA rounds ts up and ends down, then delay = ts_gpu -
    ts_cpu - dur_cpu, clipped at 0."""
    from analyzers.hta_compat import hta_launch_stats, hta_temporal

    g = pl.DataFrame(
        {
            "rank": [0, 0],
            "device": [0, 0],
            "stream": [7, 7],
            "kind": ["kernel", "kernel"],
            "name": ["a", "b"],
            "start_ns": [10_300, 20_100],
            "end_ns": [12_900, 25_000],
            "launch_api": ["cudaLaunchKernel", "cuLaunchKernel"],
            "api_start_ns": [5_500, 15_000],
            "api_end_ns": [8_700, 16_000],
        }
    )
    s = hta_launch_stats(g).row(0, named=True)
    # a: ts 11, end 12; call ts 6, end 8 -> dur 2; delay = 11 - 6 - 2 = 3. b (cuLaunchKernel) is not
    # joined.
    assert (s["ops"], s["launch_delay_median_us"], s["cpu_duration_median_us"]) == (1, 3, 2)
    t = hta_temporal(g).row(0, named=True)
    # ops [11, 12] and [21, 25]: window 14 µs, busy 5 µs, idle 9 µs
    assert (t["kernel_time_us"], t["busy_us"], t["idle_time_us"]) == (14, 5, 9)


def test_export_with_gpu_uses_that_gpu(tmp_path, capsys):
    """`export RUN --gpu NAME`: the Kernels page of a details CSV whose CC alone does not identify
    the GPU, built for the GPU the user names (the stored run is not changed)."""
    from dashboard.cli import main

    store = tmp_path / "s"
    assert main(["ingest", str(CORPUS / _entry("metrics.csv")["file"]), "--store", str(store)]) == 0
    rid = capsys.readouterr().out.split("\t")[0]
    out = tmp_path / "k.html"
    assert main(["export", rid, "--html", str(out), "--store", str(store), "--gpu", "A10G"]) == 0
    html = out.read_text()
    assert "NVIDIA A10G: given with --gpu" in html and "unknown GPU (CC 8.6)" not in html
    assert main(["export", rid, "--html", str(out), "--store", str(store)]) == 0
    assert "unknown GPU (CC 8.6)" in out.read_text()
    assert Store(store).get(rid).manifest.get("gpu_override") is None


def test_2019_reports_with_bare_metric_names_are_analysed_and_the_ones_without_durations_refused(
    tmp_path,
):
    """Issue 39: ncu 2019.x reports name the duration and the DRAM bytes without rollup suffixes
    (gpu__time_duration, dram__read_bytes, dram__write_bytes): read as the newer names, equal to
    what NVIDIA's ncu_report reads; a 2019 report that has no duration at all is refused in one line
    that says so."""
    for e in [
        x
        for x in MANIFEST["files"]
        if x["file"].startswith("pmkid-brute-force/") and x["format"] == "ncu-rep"
    ]:
        src = Source(Store(tmp_path / e["file"].replace("/", "_")))
        run, _ = src.ingest_path(CORPUS / e["file"])
        k = src.ncu(run).kernels
        want = e["expected"]["reference"]["first_launches"][0]["metrics"]
        assert k["duration_ns"].to_list() == [want["gpu__time_duration"]]
        assert k["dram_read_bytes"].to_list() == [want["dram__read_bytes"]]
        assert k["dram_write_bytes"].to_list() == [want["dram__write_bytes"]]
    dark = _entry("fill_kernel_xavier")
    with pytest.raises(ArtifactError, match="no kernel has a duration"):
        Source(Store(tmp_path / "dark")).ingest_path(CORPUS / dark["file"])
