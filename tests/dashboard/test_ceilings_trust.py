"""Ceilings you can trust: a poisoned bench result changes no finding and no % of peak; what is
rejected is shown with the reason; a run's ceilings can be pinned or excluded (kept in the store,
used by the CLI and the pages alike)."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

from analyzers import ceilings
from analyzers.gpus import find_gpu
from tests.conftest import H200_KERNELS, SAMPLES

BENCH = sorted(SAMPLES.glob("h200/bench_suite/bench_*.json.gz"))[0]


def real_doc() -> dict:
    return json.loads(gzip.decompress(BENCH.read_bytes()))


def poisoned(
    value: float, metric: str = "dram_copy_bandwidth", *, gpu: str | None = None, tag: str = ""
) -> bytes:
    """The real H200 bench document with one ceiling replaced (a different artifact: a run of its own)."""
    doc = real_doc()
    for c in doc["ceilings"]:
        if c["metric"] == metric:
            c["value"] = value
    if gpu:
        doc["gpu"]["name"] = gpu
    doc["started"] = f"{doc['started']} {tag or value}"
    return json.dumps(doc).encode()


def snapshot(src, rid) -> list[tuple]:
    """Every finding and % of peak of the ncu run, as `analyze --format json` reports them."""
    from dashboard.cli.core import ncu_report

    rep = ncu_report(src.ncu(rid), "x")
    keys = (
        "top_finding",
        "lost_ns",
        "dram_peak_fraction",
        "dram_measured_fraction",
        "tensor_peak_fraction",
    )
    kernels = rep["kernels"]
    kernels = kernels.to_dicts() if hasattr(kernels, "to_dicts") else kernels
    return [tuple(k.get(x) for x in keys) for k in kernels] + [
        tuple(sorted((n, c["value"]) for n, c in rep["measured_ceilings"].items()))
    ]


POISONS = [
    ("dram 1e14 B/s, 21x the datasheet", dict(value=1e14)),
    ("dram 1e3 B/s, a tiny one", dict(value=1e3)),
    ("dram 5.0e12 B/s, above the 4.8e12 datasheet", dict(value=5.0e12)),
    ("fp32 9e14 FLOP/s", dict(value=9e14, metric="fp32_flop_rate")),
    ("bf16 1 FLOP/s", dict(value=1.0, metric="bf16_dense_flop_rate")),
    ("smem 9e14 B/s", dict(value=9e14, metric="smem_read_bandwidth")),
    ("launch 1 ns", dict(value=1e-9, metric="launch_back_to_back")),
    ("graph 50 ms", dict(value=0.05, metric="graph_node_replay")),
    (
        "an H100's perfect copy, claimed by another model",
        dict(value=3.3e12, gpu="NVIDIA H100 80GB HBM3"),
    ),
]


def test_a_poisoned_bench_result_changes_no_finding_or_percent_of_peak(store):
    from dashboard.core.source import Source

    src = Source(store)
    rid = src.ingest_path(H200_KERNELS / "full_raw.csv.gz")[0].run_id
    src.ingest_path(BENCH)
    base = snapshot(Source(store), rid)
    # the measured ceiling is in use
    assert any(v is not None for row in base[:-1] for v in row[3:4])
    for label, kw in POISONS:
        src.ingest_bytes(poisoned(**kw), f"poisoned_{label.split()[0]}.json")
        again = Source(store)
        assert snapshot(again, rid) == base, label
    judged = Source(store).ceilings()
    rejected = judged.filter(pl.col("status") == "rejected")
    assert rejected.height >= len(POISONS) - 1 and rejected["reason"].null_count() == 0
    # the same for the trace analysis' launch floor
    trace = src.ingest_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz")[0].run_id
    assert Source(store).trace(trace).summary.launch_floor_ns == pytest.approx(
        ceilings.launch_floor_ns(
            ceilings.judge_ceilings(
                ceilings.ceilings_frame(
                    Source(store).bench_runs()[-1].table("ceilings"),
                    run_id="x",
                    gpu_name="NVIDIA H200",
                )
            ),
            "NVIDIA H200",
        )
    )


@pytest.mark.parametrize(
    "value,unit,resource,ok",
    [
        (4.28e12, "B/s", "dram", True),
        (4.81e12, "B/s", "dram", True),
        (5.1e12, "B/s", "dram", False),
        (2.0e11, "B/s", "dram", False),
        (1e30, "B/s", "dram", False),
        (-1.0, "B/s", "dram", False),
        (float("nan"), "B/s", "dram", False),
        (3.2e13, "B/s", "smem", True),
        (3.6e13, "B/s", "smem", False),
        (8.4e12, "B/s", "l2", True),
        (1e12, "B/s", "l2", False),
        (6.5e-6, "s", "launch", True),
        (1e-9, "s", "launch", False),
        (5e-7, "s", "graph", True),
        (55e9, "B/s", "h2d", True),
        (8e9, "B/s", "h2d", True),
        (70e9, "B/s", "h2d", False),
    ],
)
def test_plausibility_bounds_on_the_h200(value, unit, resource, ok):
    """Each bound flips: the H200's real measurements pass, a little above the datasheet or a broken value fails."""
    why = ceilings.implausible(resource, unit, value, find_gpu("NVIDIA H200"))
    assert (why is None) == ok, why


def test_rejected_ceilings_are_on_the_gpus_page_with_the_reason(store):
    from dashboard.web.reports import build
    from dashboard.core.source import Source
    from dashboard.web.reports.report_blocks import Table

    src = Source(store)
    src.ingest_path(BENCH)
    src.ingest_bytes(poisoned(1e14), "poisoned.json")
    rep = build(Source(store), "gpus", {})
    tables = {b.name: b for b in rep.blocks if isinstance(b, Table)}
    unused = tables["ceilings_unused"].frame
    row = unused.filter(pl.col("ceiling") == "dram_copy_bandwidth").row(0, named=True)
    assert row["status"] == "rejected" and "datasheet" in row["reason"]
    best = tables["ceilings"].frame.filter(pl.col("ceiling") == "dram_copy_bandwidth")
    assert best["value"].max() < 4.8e12


def test_pin_and_exclude_a_runs_ceilings(store, capsys):
    from dashboard.cli import main
    from dashboard.core.source import Source

    src = Source(store)
    a = src.ingest_path(BENCH)[0].run_id
    # plausible, higher: it wins
    b = src.ingest_bytes(poisoned(4.6e12, tag="b"), "b.json")[0].run_id
    assert Source(store).best_ceilings("NVIDIA H200")["dram"].value == 4.6e12
    assert main(["ceilings", "--pin", a, "--store", str(store.root), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pinned"] == {"NVIDIA H200": a}
    assert {r["status"] for r in out["ceilings"] if r["run_id"] == b} == {"not pinned"}
    assert Source(store).best_ceilings("NVIDIA H200")["dram"].value == pytest.approx(
        4.283e12, rel=1e-3
    )
    assert (
        main(
            [
                "ceilings",
                "--clear",
                a,
                "--exclude",
                b,
                "--store",
                str(store.root),
                "--format",
                "json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["excluded"] == [b] and out["pinned"] == {}
    assert Source(store).best_ceilings("NVIDIA H200")["dram"].value == pytest.approx(
        4.283e12, rel=1e-3
    )
    assert main(["ceilings", "--clear", b, "--store", str(store.root)]) == 0
    assert Source(store).best_ceilings("NVIDIA H200")["dram"].value == 4.6e12


def test_a_flagged_launch_is_shown_on_every_page_it_appears(store):
    """DRAM bytes 1000x too high (a bogus unit row): the run is stored, and Kernels (table column
    and an error note), the launch detail, Home's findings and Compare all say that launch is
    implausible; `analyze` prints FLAGGED."""
    import csv
    import io
    from dashboard.web.reports import build
    from dashboard.web.reports.report_blocks import Table, Text
    from dashboard.core.source import Source

    raw = gzip.decompress((H200_KERNELS / "full_raw_base.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(raw)))
    c = rows[0].index("dram__bytes_read.sum")
    rows[2][c] = str(float(rows[2][c].replace(",", "")) * 1000)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    src = Source(store)
    good = src.ingest_path(H200_KERNELS / "full_raw_base.csv.gz")[0].run_id
    bad = src.ingest_bytes(buf.getvalue().encode(), "bogus_units.csv")[0].run_id
    src = Source(store)

    def said(rep) -> str:
        texts = [b.md for b in rep.blocks if isinstance(b, Text)]
        cells = [
            str(v)
            for b in rep.blocks
            if isinstance(b, Table)
            for col in ("flag", "implausible")
            if col in b.frame.columns
            for v in b.frame[col].drop_nulls().to_list()
        ]
        return " ".join(texts + cells)

    for page, params in (
        ("kernels", {"run": bad}),
        ("kernels", {"run": bad, "kernel": "0"}),
        ("home", {}),
        ("compare", {"a": good, "b": bad}),
    ):
        assert "spec peak of 4,800 GB/s" in said(build(src, page, params)), page
    assert "spec peak" not in said(build(src, "kernels", {"run": good}))
