"""What `.ncu-rep` parsing keeps beyond metrics (the Source Counters per SASS instruction, each
metric's section), and deleting a run from the store (atomic: renamed out of the listing, then
removed)."""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import H200_KERNELS, store_snapshot
from dashboard.core.source import Source


def test_ncu_rep_keeps_source_counters_and_sections():
    pytest.importorskip("ncu_report")
    from collectors.ingest import parse_path
    from collectors.schema import METRIC_SCHEMA, SASS_SCHEMA, SOURCE_METRIC_SCHEMA

    p = parse_path(H200_KERNELS / "full.ncu-rep.gz")
    sass, sm = p.tables["sass"], p.tables["source_metrics"]
    assert (
        sass.schema == SASS_SCHEMA
        and sm.schema == SOURCE_METRIC_SCHEMA
        and p.tables["metrics"].schema == METRIC_SCHEMA
    )
    assert (
        set(sass["id"]) == set(range(9))
        and p.meta["source_counters"] is True
        and p.meta["source_lines"] is False
    )
    # ingest leaves the SASS text out (most of a report's reading time); it is read per launch when shown
    assert sass["sass"].null_count() == sass.height
    from collectors.decompress import gunzip_if_needed
    from collectors.ncu import with_source_text

    raw, inner = gunzip_if_needed(
        (H200_KERNELS / "full.ncu-rep.gz").read_bytes(), "full.ncu-rep.gz"
    )
    sass = with_source_text(sass, raw, inner, 5)
    five = sass.filter(pl.col("id") == 5)
    # the column reads
    assert five["offset"].min() == 0 and five["sass"].str.starts_with("LDS").sum() >= 8
    assert five["address"].n_unique() == five.height
    names = set(sm["metric"])
    assert {
        "inst_executed",
        "smsp__pcsamp_sample_count",
        "smsp__pcsamp_warps_issue_stalled_mio_throttle",
    } <= names
    # every counter sits on an instruction
    assert set(sm["address"]) <= set(sass["address"])
    # the section that shows each metric
    got = dict(p.tables["metric_sections"].iter_rows())
    assert set(got) <= set(p.tables["metrics"]["metric"].cast(pl.String))
    assert got["gpu__time_duration.sum"] == "GPU Speed Of Light Throughput"
    assert got["launch__registers_per_thread"] == "Launch Statistics"
    assert p.tables["kernels"]["inst_executed"][7] == pytest.approx(2.2898e9, rel=1e-3)


def test_metric_value_is_ncu_reports_value(tmp_path):
    """collectors.ncu_source.metric_value (a getter table built once) gives what ncu_report's
    IMetric.value gives, of the same type: every metric of every launch of a real report, and the
    first 50 instances of the correlation ids and values of each of its Source Counters."""
    ncu_report = pytest.importorskip("ncu_report")
    import gzip

    from collectors.ncu_source import metric_value

    path = tmp_path / "full.ncu-rep"
    path.write_bytes(gzip.decompress((H200_KERNELS / "full.ncu-rep.gz").read_bytes()))
    rng = ncu_report.load_report(str(path)).range_by_idx(0)
    seen, kinds = 0, set()
    for ai in range(rng.num_actions()):
        act = rng.action_by_idx(ai)
        for name in act.metric_names():
            met = act.metric_by_name(name)
            pairs = [(met, None)]
            if met.has_correlation_ids():
                cid = met.correlation_ids()
                pairs += [(cid, i) for i in range(min(cid.num_instances(), 50))]
                pairs += [(met, i) for i in range(min(met.num_instances(), 50))]
            for m, i in pairs:
                want = m.value() if i is None else m.value(i)
                got = metric_value(m, i)
                assert type(got) is type(want) and (got == want or got != got and want != want), (
                    name,
                    i,
                )
                kinds.add(m.kind() if i is None else m.kind(i))
                seen += 1
    # strings, doubles and integers were all compared
    assert seen > 20_000 and len(kinds) >= 3


def test_exports_name_sections_too():
    from collectors.ingest import parse_path

    d = parse_path(H200_KERNELS / "full_details_base.csv.gz").tables
    named = set(d["metric_sections"]["metric"])
    # the details page names every section
    assert named == set(d["metrics"]["metric"].cast(pl.String))
    r = parse_path(H200_KERNELS / "full_raw_base.csv.gz").tables
    got = dict(r["metric_sections"].iter_rows())
    assert (
        got["gpu__time_duration.sum"] == "GPU Speed Of Light Throughput"
    )  # the raw page: from the label table


def test_delete_is_atomic_and_leaves_the_rest(store, capsys):
    from collectors.errors import RunNotFound
    from dashboard.cli import main

    a, _ = Source(store).ingest_path(H200_KERNELS / "basic_raw.csv.gz")
    b, _ = Source(store).ingest_path(H200_KERNELS / "full_raw.csv.gz")
    keep = {k: v for k, v in store_snapshot(store.root).items() if k.startswith(f"runs/{b.run_id}")}
    # a leftover of an interrupted delete
    (store.runs_dir / f".deleted-{a.run_id}-dead").mkdir()
    gone = store.delete(a.run_id[:6])
    assert gone.run_id == a.run_id and [r.run_id for r in store.runs()] == [b.run_id]
    assert not list(store.runs_dir.glob(".deleted-*")) and not (store.runs_dir / a.run_id).exists()
    assert {
        k: v for k, v in store_snapshot(store.root).items() if k.startswith(f"runs/{b.run_id}")
    } == keep
    # the run index forgets it at once
    indexed = store.index(refresh=False).runs.collect()["run_id"].to_list()
    assert indexed == [b.run_id]
    with pytest.raises(RunNotFound):
        store.delete(a.run_id)
    capsys.readouterr()
    assert main(["rm", b.run_id, "--store", str(store.root)]) == 0
    assert (
        f"{b.run_id}\tncu\tfull_raw.csv.gz\tdeleted" in capsys.readouterr().out
        and store.runs() == []
    )
    assert main(["rm", "abcd1234", "--store", str(store.root)]) == 1
    assert "abcd1234" in capsys.readouterr().err


SOURCE_REPORT = H200_KERNELS.parent / "source_counters" / "source.ncu-rep.gz"


def test_lineinfo_report_ranks_cuda_source_lines():
    """The chapter-5 kernels built with -lineinfo (record.sh): every profiled launch has SASS mapped
    to lines of chapter5.cuh, the line table sums its instructions' samples exactly, and the
    stride-32 column read spends its time on shared-memory loads stalled on the MIO queue or the
    short scoreboard (its 32-way bank conflicts), on a line of the kernel's loop in chapter5.cuh."""
    pytest.importorskip("ncu_report")
    from analyzers.source_hotspots import source_hotspots
    from collectors.ingest import parse_path

    from collectors.decompress import gunzip_if_needed
    from collectors.ncu import with_source_text

    p = parse_path(SOURCE_REPORT)
    assert p.meta["source_counters"] is True and p.meta["source_lines"] is True
    raw, inner = gunzip_if_needed(SOURCE_REPORT.read_bytes(), SOURCE_REPORT.name)
    k = p.tables["kernels"]
    for kid in k["id"].to_list():
        p.tables["sass"] = with_source_text(p.tables["sass"], raw, inner, kid)
        h = source_hotspots(
            p.tables["sass"], p.tables["source_metrics"], p.tables["source_files"], kid
        )
        assert h.lines.height > 0 and h.total_samples > 0, kid
        assert int(h.lines["samples"].sum()) == int(
            h.sass.filter(pl.col("line").is_not_null())["samples"].sum()
        )
        assert any(
            str(f).endswith(("chapter5.cuh", "ks_samples.cu")) for f in h.lines["file"].to_list()
        )
    # launches 5 and 6 are the column read at stride 32 and 33, as in
    # ../chapter5_kernels/full.ncu-rep (same program)
    assert k["kernel_name"][5] == k["kernel_name"][6] == "ks_colread4"
    h32, h33 = (
        source_hotspots(p.tables["sass"], p.tables["source_metrics"], p.tables["source_files"], i)
        for i in (5, 6)
    )
    # the 32-way conflicts: ~21x the warp time
    assert h32.total_samples > 5 * h33.total_samples
    top = h32.sass.head(3)
    assert any(t.startswith("LDS") for t in top["sass"]) and any(
        "MIO throttle" in r or "short scoreboard" in r for r in top["top_reasons"]
    )
    hot = h32.lines.row(0, named=True)
    # the column read's loop, not the host code
    assert str(hot["file"]).endswith("chapter5.cuh")
