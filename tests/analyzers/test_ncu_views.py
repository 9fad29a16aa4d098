"""Source hot spots, rooflines, display names, shares above 100 %, metric baselines and
counter-based textbook matching, on the real H200 Nsight Compute reports
(sample_traces/h200/chapter5_kernels/), each with a change to the measurement that flips the result."""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import H200_KERNELS

pytest.importorskip("ncu_report")


@pytest.fixture(scope="module")
def full():
    from collectors.ingest import parse_path

    return parse_path(H200_KERNELS / "full.ncu-rep.gz")


@pytest.fixture(scope="module")
def basic():
    from collectors.ingest import parse_path

    return parse_path(H200_KERNELS / "basic.ncu-rep.gz")


@pytest.fixture(scope="module")
def analysis(full):
    from analyzers.gpus import resolve_gpu
    from analyzers.ncu_run import analyze_ncu

    return analyze_ncu(
        full.tables["kernels"], resolve_gpu(full.meta["gpu_name"], full.meta["device_attributes"])
    )


def _metrics(full, kid):
    m = full.tables["metrics"].filter(pl.col("id") == kid).drop_nulls("value")
    return dict(zip(m["metric"].to_list(), m["value"].to_list()))


# ---- source hot spots
# -------------------------------------------------------------------------------------
def test_source_hotspots_of_the_column_reads(full, analysis):
    from analyzers.source_hotspots import source_hotspots

    t = full.tables
    from collectors.decompress import gunzip_if_needed
    from collectors.ncu import with_source_text

    raw, inner = gunzip_if_needed(
        (H200_KERNELS / "full.ncu-rep.gz").read_bytes(), "full.ncu-rep.gz"
    )
    t = dict(t)
    for kid in (5, 6):  # ingest leaves the SASS text out; it is read per launch when shown
        t["sass"] = with_source_text(t["sass"], raw, inner, kid)
    h32 = source_hotspots(t["sass"], t["source_metrics"], t["source_files"], 5)
    h33 = source_hotspots(t["sass"], t["source_metrics"], t["source_files"], 6)
    # the per-address instruction counts add up to the launch's own counter
    for h, kid in ((h32, 5), (h33, 6)):
        assert h.total_inst_executed == pytest.approx(
            analysis.launch(kid)["inst_executed"], rel=1e-9
        )
        assert h.sass["samples"].sum() == h.total_samples > 0 and h.sass[
            "sample_share"
        ].sum() == pytest.approx(1.0)
        assert not h.has_lines and any("-lineinfo" in m for m in h.missing)
    # stride 32: the warps wait on the shared-memory queue (MIO throttle) at the LDS instructions
    assert (
        h32.reasons.row(0, named=True)["reason"] == "mio_throttle" and h32.reasons["share"][0] > 0.5
    )
    lds = h32.sass.filter(pl.col("sass").str.starts_with("LDS"))
    assert (
        lds["samples"].sum() / h32.total_samples > 0.5 and "MIO throttle" in lds["top_reasons"][0]
    )
    # stride 33 (padded): no MIO throttle to speak of, and 22x fewer samples for the same
    # instructions
    mio33 = h33.reasons.filter(pl.col("reason") == "mio_throttle")["share"]
    assert (
        mio33.item() if mio33.len() else 0.0
    ) < 0.05 and h32.total_samples > 20 * h33.total_samples
    assert source_hotspots(t["sass"], t["source_metrics"], t["source_files"], 99) is None


def test_source_lines_aggregate_and_show_their_text():
    from analyzers.source_hotspots import source_hotspots

    sass = pl.DataFrame(
        {
            "id": [0, 0, 0],
            "address": [16, 32, 48],
            "offset": [0, 16, 32],
            "sass": ["LDG.E R2, [R4]", "FFMA R1, R2, R3, R1", "STG.E [R6], R1"],
            "file": ["/src/k.cu"] * 3,
            "line": [3, 3, 4],
        }
    )
    rows = [
        (0, a, m, v)
        for a, s, w, lg in ((16, 60, 40, 58), (32, 30, 40, 0), (48, 10, 40, 0))
        for m, v in (
            ("smsp__pcsamp_sample_count", s),
            ("inst_executed", w),
            ("smsp__pcsamp_warps_issue_stalled_long_scoreboard", lg),
        )
    ]
    metrics = pl.DataFrame(
        rows,
        schema={"id": pl.Int64, "address": pl.Int64, "metric": pl.String, "value": pl.Float64},
        orient="row",
    )
    files = pl.DataFrame(
        {
            "file": ["/src/k.cu"],
            "content": ["// k\n__global__ void k() {\n  y = a * x + y;\n  out = y;\n"],
        }
    )
    h = source_hotspots(sass, metrics, files, 0)
    assert (
        h.has_lines
        and h.lines["line"].to_list() == [3, 4]
        and h.lines["samples"].to_list() == [90, 10]
    )
    assert h.lines["code"][0] == "y = a * x + y;" and h.lines["instructions"][0] == 2
    assert (
        h.sass["sass"][0].startswith("LDG") and h.sass["top_reasons"][0] == "long scoreboard 97 %"
    )


def test_csv_exports_have_no_source_tables():
    from collectors.ingest import parse_path

    p = parse_path(H200_KERNELS / "full_raw_base.csv.gz")
    assert p.tables["sass"].height == 0 and p.meta["source_counters"] is False


# ---- names, rooflines, shares above 100 %
# -------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,shown",
    [
        ("void smem_column<32>(float*, int)", "smem_column<32>"),
        ("void smem_column<33>(float*, int)", "smem_column<33>"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1>>(int, at::native::FillFunctor<float>, std::array<char*, 1>)",
            "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1>>",
        ),
        (
            "void at::native::(anonymous namespace)::silu<float>(int)",
            "at::native::(anonymous namespace)::silu<float>",
        ),
        ("ks_copy_u4", "ks_copy_u4"),
    ],
)
def test_display_names_keep_template_arguments(name, shown):
    from analyzers.kernels import display_name

    assert display_name(name) == shown


def test_rooflines_have_l1_l2_dram_and_every_launch(analysis):
    from analyzers.roofline import flop_roofline, instruction_roofline

    fr = flop_roofline(analysis.kernels, analysis.gpu, analysis.measured)
    levels = {r["level"] for r in fr.roofs if r["kind"] == "memory"}
    assert levels == {"L1/shared", "L2", "DRAM"}
    l2 = next(r for r in fr.roofs if r["level"] == "L2")["value"]
    # ncu's own L2 peak: 6016 B/cycle × 1.71 GHz
    assert 8e12 < l2 < 12e12
    # the copy and transposes do no FLOP ...
    assert sorted(fr.not_drawn) == [0, 1, 2, 3, 4]
    ir = instruction_roofline(analysis.kernels, analysis.gpu, analysis.measured)
    # ... but are here
    assert ir.not_drawn == [] and set(ir.points["launch"]) == {str(i) for i in range(9)}
    issue = next(r for r in ir.roofs if r["kind"] == "compute")["value"]
    rate = ir.points.filter(pl.col("launch") == "7")["rate"][0]
    # below the issue rate: a roofline that can fail
    assert 0 < rate < issue
    copy = ir.points.filter((pl.col("launch") == "0") & (pl.col("level") == "DRAM")).row(
        0, named=True
    )
    dram = next(r for r in ir.roofs if r["level"] == "DRAM")["value"]
    assert copy["rate"] <= copy["intensity"] * dram * 1.001  # the copy sits under its DRAM roof


def test_a_share_above_100_percent_says_why(full):
    from analyzers.ceilings import Ceiling
    from analyzers.findings import kernel_findings
    from analyzers.gpus import resolve_gpu
    from analyzers.ncu_run import analyze_ncu

    gpu = resolve_gpu(full.meta["gpu_name"], full.meta["device_attributes"])
    ok = analyze_ncu(full.tables["kernels"], gpu, {"dram": Ceiling(4.3e12, "bench")})
    # nothing above 100 %: nothing to explain
    assert ok.over_peak == []
    # a measured copy ceiling below what the copy kernel reached: the share passes 100 % and says
    # why
    low = analyze_ncu(full.tables["kernels"], gpu, {"dram": Ceiling(3.0e12, "bench")})
    note = next(n for n in low.over_peak if n["id"] == 0)
    assert (
        note["column"] == "dram_measured_fraction"
        and note["pct"] > 100
        and "not a hardware limit" in note["reason"]
    )
    f = kernel_findings(low.launch(0), gpu, low.measured)[0]
    assert "above the measured ceiling" in f.title and "not a hardware limit" in f.text


# ---- baselines
# -----------------------------------------------------------------------------------------------
def test_metric_baseline_of_two_real_reports(full, basic):
    from analyzers.baseline import metric_diff
    from analyzers.compare import launch_metric_rows

    m = lambda p, k: launch_metric_rows(p.tables["metrics"], [k], p.tables["metric_sections"])
    d = metric_diff(m(basic, 5), m(full, 5))
    # bookkeeping left out
    assert d.height > 400 and not d["metric"].str.starts_with("profiler__").any()
    launch = d.filter(pl.col("kind") == "launch parameter")
    # same launch both times
    assert launch.height > 20 and set(launch["status"]) == {"unchanged"}
    # moved-most first, grouped by section: the first section's top row moved beyond its noise
    assert d["status"][0] in ("higher", "lower") and d["moved"][0] == d["moved"].max()
    first = d["section"][0]
    assert d.filter(pl.col("section") == first)["moved"].is_sorted(descending=True)
    # a launch parameter that changes is flagged, whatever its size (noise threshold 0)
    b2 = m(full, 5).with_columns(
        pl.when(pl.col("metric") == "launch__registers_per_thread")
        .then(pl.col("value") + 1)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    row = (
        metric_diff(m(basic, 5), b2)
        .filter(pl.col("metric") == "launch__registers_per_thread")
        .row(0, named=True)
    )
    assert row["status"] == "higher" and row["threshold_pct"] == 0


def test_metric_noise_from_the_launches_spread():
    from analyzers.baseline import metric_diff

    def launches(vals):
        return pl.DataFrame(
            {
                "id": list(range(len(vals))),
                "metric": ["gpu__time_duration.sum"] * len(vals),
                "value": vals,
                "unit": ["ns"] * len(vals),
                "section": ["GPU Speed Of Light"] * len(vals),
            }
        )

    noisy = metric_diff(launches([100.0, 160.0, 60.0]), launches([110.0, 170.0, 70.0])).row(
        0, named=True
    )
    assert noisy["status"] == "too noisy to judge" and noisy["threshold_pct"] > 10
    tight = metric_diff(launches([100.0, 101.0, 99.0]), launches([110.0, 111.0, 109.0])).row(
        0, named=True
    )
    assert tight["status"] == "higher" and tight["threshold_pct"] == pytest.approx(5.0)


def test_relatedness():
    from analyzers.baseline import relatedness

    # 2 of 4 shared
    assert relatedness(["a", "b", "c"], ["a", "b", "d"])["related"] is True
    assert relatedness(["a", "b", "c"], ["a", "x", "y"])["related"] is False  # 1 of 5


# ---- textbook cases by what the kernel does
# ---------------------------------------------------------------
def test_cases_recognised_by_counters_never_by_name(full, analysis):
    from analyzers.cases.kernel_match import infer, kernel_comparisons

    gpu = analysis.gpu
    got = {r["id"]: infer(r, gpu) for r in analysis.kernels.iter_rows(named=True)}
    assert got[5]["bank.column_read"][0] == {"stride": 32, "width": 4}
    # the padded launch: its own
    assert got[6]["bank.column_read"][0] == {"stride": 33, "width": 4}
    assert got[4]["transpose.tile"][0] == {"t": 32, "pad": 1, "n": 8192}
    assert {k: v for k, v in got[7]["tiling.traffic"][0].items() if k in "MNKmn"} == {
        "M": 1024,
        "N": 12288,
        "K": 4096,
        "m": 64,
        "n": 64,
    }
    assert got[8]["tiling.traffic"][0]["m"] == 128 and got[0] == {}
    # the name plays no part: a renamed column read is recognised the same
    row = dict(
        analysis.launch(6),
        kernel_name="my_kernel",
        short_name="my_kernel",
        display_name="my_kernel",
    )
    kc = kernel_comparisons(row, _metrics(full, 6), gpu)
    assert [k.case_id for k in kc] == ["bank.column_read"] and kc[0].params["stride"] == 33
    c = kc[0].comparisons[0]
    assert c.quantity == "wavefronts" and c.prediction.value == 1 and c.verdict.kind == "agrees"
    # used to infer: not judged
    assert "degree" not in {x.quantity for x in kc[0].comparisons}


def test_a_changed_measurement_changes_the_match_and_the_verdict(full, analysis):
    from analyzers.cases.kernel_match import infer, kernel_comparisons

    gpu = analysis.gpu
    # conflicts that do not give a power-of-two degree: not a column read
    odd = dict(
        analysis.launch(5), smem_ld_bank_conflicts=analysis.launch(5)["smem_ld_wavefronts"] * 0.7
    )
    assert "bank.column_read" not in infer(odd, gpu)
    # a tile whose shared memory no tile shape explains: not recognised as the tiling case
    assert "tiling.traffic" not in infer(dict(analysis.launch(7), smem_static_bytes=12_345.0), gpu)
    # the stride-32 launch with 2.5 % more shared load instructions (some loads that are not column
    # reads): still recognised (its phases round to 1), but its 31.2 passes per instruction no
    # longer agree with the model's 32
    m = _metrics(full, 5)
    key = "smsp__sass_inst_executed_op_shared_ld.sum"
    row = dict(analysis.launch(5), smem_ld_requests=analysis.launch(5)["smem_ld_requests"] * 1.025)
    kc = kernel_comparisons(row, dict(m, **{key: m[key] * 1.025}), gpu)
    c = next(c for k in kc for c in k.comparisons if c.quantity == "wavefronts")
    assert c.prediction.value == 32 and c.verdict.kind != "agrees"
    # twice the instructions: half a phase per instruction is no column read at all
    row2 = dict(analysis.launch(5), smem_ld_requests=analysis.launch(5)["smem_ld_requests"] * 2)
    assert "bank.column_read" not in infer(row2, gpu)
