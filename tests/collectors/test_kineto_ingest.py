"""PyTorch profiler (Kineto) ingestion: the H200 samples, synthetic layouts, broken files, rank folders."""

from __future__ import annotations

import decimal
import gzip
import json

import polars as pl
import pytest

from collectors import ingest, kineto, kineto_events, kineto_typed, schema
from collectors.ingest import detect_kind, parse_bytes
from collectors.errors import ArtifactError
from collectors.ingest import expand_paths
from tests.conftest import H200_TORCH, store_snapshot
from dashboard.core.source import Source

SAMPLES = {
    "ffn_M1024_eager": H200_TORCH / "ffn_M1024_eager.json.gz",
    "ffn_M1_eager": H200_TORCH / "ffn_M1_eager.json.gz",
    "ffn_M1_graph": H200_TORCH / "ffn_M1_graph.json.gz",
    "triton_add_x300": H200_TORCH / "triton_add_x300.json.gz",
}


def _parse(key):
    p = SAMPLES[key]
    return parse_bytes(p.read_bytes(), p.name)


def _raw_events(key):
    return json.loads(gzip.decompress(SAMPLES[key].read_bytes()), parse_float=decimal.Decimal)


# ----------------------------------------------------------------------------------------------
# real traces
@pytest.mark.parametrize(
    "key, kernels, memsets, apis",
    [
        (
            "ffn_M1024_eager",
            25,
            10,
            {
                ("kernel", "cuLaunchKernelEx"): 15,
                ("kernel", "cudaLaunchKernel"): 10,
                ("memset", "cudaMemsetAsync"): 10,
            },
        ),
        (
            "ffn_M1_eager",
            120,
            0,
            {
                ("kernel", "cuLaunchKernelEx"): 60,
                ("kernel", "cudaLaunchKernel"): 40,
                ("kernel", "cudaLaunchKernelExC"): 20,
            },
        ),
        ("ffn_M1_graph", 180, 0, {("kernel", "cudaGraphLaunch"): 180}),
        ("triton_add_x300", 300, 0, {("kernel", "cuLaunchKernelEx"): 300}),
    ],
)
def test_samples_counts_and_launch_apis(key, kernels, memsets, apis):
    p = _parse(key)
    g = p.tables["gpu_ops"]
    assert p.kind == "kineto"
    assert p.meta["gpu_name"] == "NVIDIA H200"
    # no distributedInfo: rank 0, no error
    assert p.meta["ranks"] == [0] and p.meta["world_size"] is None
    assert p.meta["devices"][0]["sm_count"] == 132
    assert p.meta["counts"]["kernels"] == kernels == p.meta["counts"]["kernels_with_launch"]
    assert p.meta["counts"]["memset"] == memsets
    got = {(k, a): n for k, a, n in g.group_by("kind", "launch_api").len().rows()}
    assert got == apis
    assert dict(g.schema) == dict(schema.GPU_OPS_SCHEMA)


@pytest.mark.parametrize("key", list(SAMPLES))
def test_every_kernel_with_a_launch_call_in_the_trace_is_matched(key):
    """Independent of our join: every GPU op whose correlation id belongs to a runtime/driver call
    of the trace must carry that call's name (HTA 0.5 misses cuLaunchKernelEx and cudaGraphLaunch)."""
    ev = _raw_events(key)["traceEvents"]
    calls = {
        e["args"]["correlation"]: e["name"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    expected = sorted(
        (e["args"]["correlation"], calls[e["args"]["correlation"]])
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and e.get("args", {}).get("correlation") in calls
    )
    g = _parse(key).tables["gpu_ops"]
    assert expected and len(expected) == g.height
    assert sorted(g.select("correlation", "launch_api").rows()) == expected


def test_graph_launch_runs_eighteen_kernels_per_replay():
    g = _parse("ffn_M1_graph").tables["gpu_ops"]
    per = g.group_by("graph_launch_correlation").len()
    assert per.height == 10 and per["len"].to_list() == [18] * 10
    assert g["op_name"].null_count() == 180  # graph kernels carry no External id


def test_kernels_joined_to_aten_ops_by_external_id():
    g = _parse("ffn_M1024_eager").tables["gpu_ops"]
    ops = dict(g.filter(pl.col("kind") == "kernel").group_by("op_name").len().rows())
    assert ops == {"aten::mm": 15, "aten::silu": 5, "aten::mul": 5}
    assert g.filter(pl.col("kind") == "memset")["op_name"].to_list() == ["aten::mm"] * 10


def test_timestamps_are_exact_integer_ns():
    d = _raw_events("ffn_M1_eager")
    base = d["baseTimeNanoseconds"]
    want = sorted(
        (int(base + e["ts"] * 1000), int(base + (e["ts"] + e["dur"]) * 1000))
        for e in d["traceEvents"]
        if e.get("cat") == "kernel"
    )
    g = _parse("ffn_M1_eager").tables["gpu_ops"]
    assert sorted(g.select("start_ns", "end_ns").rows()) == want


def test_launch_delay_and_queue_definitions():
    g = _parse("triton_add_x300").tables["gpu_ops"]
    lag = g["start_ns"] - g["api_end_ns"]
    assert (g["launch_delay_ns"] == lag.clip(lower_bound=0)).all()
    assert g["queue_ns"].null_count() == int((lag < 0).sum()) == 3
    # the first Triton launch takes 440 µs (module load)
    first = g.sort("start_ns").row(0, named=True)
    assert first["api_duration_ns"] == 439966 and first["launch_delay_ns"] == 0


# ----------------------------------------------------------------------------------------------
# synthetic layouts
def _trace(events, *, base=None, rank=None, compact=False, extra=None):
    top = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108}],
    }
    if rank is not None:
        top["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    if base is not None:
        top["baseTimeNanoseconds"] = base
    top.update(extra or {})
    top["traceEvents"] = events
    top["traceName"] = "synthetic"
    return json.dumps(
        top, separators=(",", ":") if compact else None, indent=None if compact else 2
    ).encode()


def _launch_pair(
    i, ts, *, api="cudaLaunchKernel", cat="cuda_runtime", name="k", stream=7, kdur=2.0, delay=3.0
):
    corr = 100 + i
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::op",
            "pid": 11,
            "tid": 12,
            "ts": ts - 1,
            "dur": 10,
            "args": {"External id": i},
        },
        {
            "ph": "X",
            "cat": cat,
            "name": api,
            "pid": 11,
            "tid": 12,
            "ts": ts,
            "dur": 4.5,
            "args": {"correlation": corr, "External id": i},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": stream,
            "ts": ts + 4.5 + delay,
            "dur": kdur,
            "args": {
                "device": 0,
                "stream": stream,
                "correlation": corr,
                "External id": i,
                "grid": [4, 2, 1],
                "block": [128, 1, 1],
                "registers per thread": 32,
                "shared memory": 1024,
            },
        },
        {
            "ph": "f",
            "id": corr,
            "pid": 0,
            "tid": stream,
            "ts": ts + 7.5,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
    ]


def test_absolute_timestamps_old_layout_and_all_launch_apis():
    t0 = 1712195495505543.0  # absolute epoch µs, no baseTimeNanoseconds (2024 traces)
    ev = []
    for i, (api, cat) in enumerate(
        [
            ("cudaLaunchKernel", "cuda_runtime"),
            ("cudaLaunchKernelExC", "cuda_runtime"),
            ("cuLaunchKernel", "cuda_driver"),
            ("cuLaunchKernelEx", "cuda_driver"),
        ]
    ):
        ev += _launch_pair(i, t0 + 20 * i, api=api, cat=cat)
    ev += [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 11,
            "tid": 12,
            "ts": t0 + 100,
            "dur": 5,
            "args": {"correlation": 900},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pinned -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": t0 + 103,
            "dur": 4,
            "args": {"device": 0, "stream": 7, "correlation": 900, "bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "old_cat_kernel",
            "pid": 0,
            "tid": 9,
            "ts": t0 + 200,
            "dur": 1,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "step",
            "pid": 11,
            "tid": 12,
            "ts": t0,
            "dur": 300,
        },
    ]
    p = kineto.parse(_trace(ev), "old.json")
    g = p.tables["gpu_ops"].sort("start_ns")
    assert (
        p.meta["timestamps"] == "absolute epoch microseconds"
        and p.meta["gpu_name"] == "NVIDIA A100-SXM4-80GB"
    )
    k = g.filter(pl.col("kind") == "kernel")
    assert k["launch_api"].to_list() == [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        None,
    ]
    assert k["launch_delay_ns"].to_list()[:4] == [3000] * 4
    assert k["start_ns"][0] == 1712195495505543000 + 7500
    assert k.row(0, named=True)["grid_x"] == 4 and k["shared_memory_bytes"][0] == 1024
    assert k["op_name"].to_list()[:4] == ["aten::op"] * 4
    m = g.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (m["copy_kind"], m["bytes"], m["launch_api"], m["queue_ns"]) == (
        "HtoD",
        4096,
        "cudaMemcpyAsync",
        None,
    )
    assert k.filter(pl.col("name") == "old_cat_kernel")["stream"].to_list() == [9]
    assert p.tables["nvtx"]["name"].to_list() == ["step"]
    api = p.tables["api_calls"]
    assert dict(api.select("name", "kind").rows()) == {
        "cudaLaunchKernel": "launch",
        "cudaLaunchKernelExC": "launch",
        "cuLaunchKernel": "launch",
        "cuLaunchKernelEx": "launch",
        "cudaMemcpyAsync": "memcpy",
    }


def test_relative_timestamps_and_rank(monkeypatch):
    ev = _launch_pair(1, 5133890154390.493)
    p = kineto.parse(_trace(ev, base=1790857026000000000, rank=3), "r3.json")
    k = p.tables["gpu_ops"]
    assert p.meta["ranks"] == [3] and k["rank"].to_list() == [3] and p.meta["world_size"] == 2
    assert k["start_ns"][0] == 1790857026000000000 + 5133890154390493 + 7500


@pytest.mark.parametrize("compact", [False, True])
def test_chunked_reading_equals_whole_document(monkeypatch, compact):
    ev = []
    for i in range(60):  # names with "}, {" inside strings defeat a naive splitter
        ev += _launch_pair(
            i, 1000.0 + 30 * i, name="void f<{lambda()#1}, {x}>(int)" if i % 7 == 0 else "k"
        )
    data = _trace(ev, base=10**18, compact=compact)
    whole = kineto.parse(data, "a.json").tables
    refuse = lambda d: (_ for _ in ()).throw(kineto_events.FastPathFailed())  # noqa: E731
    monkeypatch.setattr(kineto_typed, "TYPED_PIECE_BYTES", 300)  # tier 0 in many small pieces
    typed_pieces = kineto.parse(data, "a.json").tables
    monkeypatch.setattr(kineto, "typed_frames", refuse)
    monkeypatch.setattr(kineto_events, "NDJSON_CHUNK_BYTES", 300)  # tier 1 in many small pieces
    ndjson_pieces = kineto.parse(data, "a.json").tables
    monkeypatch.setattr(kineto, "ndjson_frames", refuse)
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 300)  # tier 2 in many small pieces
    pieces = kineto.parse(data, "a.json").tables
    for t in schema.TIMELINE_SCHEMAS:
        assert pieces[t].equals(whole[t]), t
        assert ndjson_pieces[t].equals(whole[t]), t
        assert typed_pieces[t].equals(whole[t]), t
    assert whole["gpu_ops"].height == 60 and whole["gpu_ops"]["launch_api"].null_count() == 0
    assert whole["gpu_ops"]["name"].n_unique() == 2


@pytest.mark.parametrize("key", list(SAMPLES))
def test_fast_reader_equals_exact_reader(monkeypatch, key):
    """Tier 0 (typed structs by msgspec), tier 1 (NDJSON read by polars) and tier 2 (orjson, event
    by event) give identical tables."""
    typed = _parse(key)

    def refuse(data):
        raise kineto_events.FastPathFailed

    monkeypatch.setattr(kineto, "typed_frames", refuse)
    fast = _parse(key)
    monkeypatch.setattr(kineto, "ndjson_frames", refuse)
    exact = _parse(key)
    for t in schema.TIMELINE_SCHEMAS:
        assert fast.tables[t].equals(exact.tables[t]), t
        assert typed.tables[t].equals(exact.tables[t]), t
    assert fast.meta == exact.meta == typed.meta


def test_chrome_array_format_and_empty_trace():
    p = kineto.parse(json.dumps(_launch_pair(0, 50.0)).encode(), "arr.json")
    assert p.tables["gpu_ops"].height == 1
    e = kineto.parse(_trace([]), "empty.json")
    assert all(e.tables[t].height == 0 for t in schema.TIMELINE_SCHEMAS)


# ----------------------------------------------------------------------------------------------
# broken input
def _good():
    return _trace(_launch_pair(0, 100.0) + _launch_pair(1, 200.0))


BROKEN = {
    "truncated.json": (_good()[: len(_good()) // 2], "not valid JSON"),
    "truncated.json.gz": (gzip.compress(_good())[:-20], "truncated gzip"),
    "no_ts.json": (
        _trace([{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1.0}]),
        "traceEvents[0] has no 'ts'",
    ),
    "ts_string.json": (
        _trace(
            [
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": "soon",
                    "dur": 1.0,
                    "args": {"correlation": 1},
                }
            ]
        ),
        "'ts' is 'soon'",
    ),
    "args_list.json": (
        _trace(
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 1.0,
                    "dur": 1.0,
                    "args": [1, 2],
                }
            ]
        ),
        "'args' is not an object",
    ),
    "grid.json": (
        _trace(
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 1.0,
                    "dur": 1.0,
                    "args": {"grid": "4x4"},
                }
            ]
        ),
        "'grid' is '4x4'",
    ),
    "corr.json": (
        _trace(
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 1.0,
                    "dur": 1.0,
                    "args": {"correlation": "abc"},
                }
            ]
        ),
        "'correlation' is 'abc'",
    ),
    "event_not_object.json": (_trace([1, 2]), "traceEvents[0] is a int"),
    "no_events.json": (b'{"schemaVersion": 1}', "no 'traceEvents' array"),
    "events_not_list.json": (b'{"traceEvents": {"a": 1}}', "no 'traceEvents' array"),
    "number.json": (b"[1, 2, 3]", "traceEvents[0] is a int"),
}


@pytest.mark.parametrize("fname", list(BROKEN))
def test_malformed_traces_raise_and_leave_the_store_unchanged(store, fname):
    data, msg = BROKEN[fname]
    Source(store).ingest_bytes(SAMPLES["triton_add_x300"].read_bytes(), "triton_add_x300.json.gz")
    before = store_snapshot(store.root)
    with pytest.raises(ArtifactError) as ei:
        Source(store).ingest_bytes(data, fname)
    assert ei.value.source == fname and msg in ei.value.problem
    assert store_snapshot(store.root) == before


# ----------------------------------------------------------------------------------------------
# rank folders
def _rank_folder(tmp_path, ranks, name="job"):
    d = tmp_path / name
    d.mkdir()
    for r in ranks:
        ev = _launch_pair(r, 100.0 + r)
        data = _trace(ev, base=10**18, rank=r)
        (d / f"rank{r}.pt.trace.json.gz").write_bytes(gzip.compress(data, mtime=0))
    (d / "notes.md").write_text("ignored")
    return d


def test_rank_folder_is_one_deterministic_run(tmp_path, store):
    d = _rank_folder(tmp_path, [1, 0])
    a, name = ingest.pack_rank_folder(d)
    b, _ = ingest.pack_rank_folder(d)
    assert a == b and name == "job.kineto.tar" and detect_kind(a, name) == "kineto"
    p = parse_bytes(a, name)
    assert p.meta["ranks"] == [0, 1]
    assert sorted(p.tables["gpu_ops"].select("rank", "launch_api").rows()) == [
        (0, "cudaLaunchKernel"),
        (1, "cudaLaunchKernel"),
    ]
    assert expand_paths([tmp_path]) == [d]
    run, created = Source(store).ingest_path(d)
    assert created and run.kind == "kineto" and run.meta["ranks"] == [0, 1]
    assert run.artifact_path.name == "job.kineto.tar"


def test_folders_that_are_not_rank_sets(tmp_path):
    same = _rank_folder(tmp_path, [0], name="one")
    assert ingest.pack_rank_folder(same) is None  # a single trace is a plain file
    dup = tmp_path / "dup"
    dup.mkdir()
    for i in range(2):
        (dup / f"t{i}.json").write_bytes(_trace(_launch_pair(i, 10.0), rank=0))
    assert ingest.pack_rank_folder(dup) is None  # repeated rank
    assert ingest.pack_rank_folder(H200_TORCH) is None  # samples carry no distributedInfo
    files = expand_paths([H200_TORCH])
    assert sorted(f.name for f in files) == sorted(p.name for p in SAMPLES.values())


def test_python_caches_beside_the_artifacts_are_skipped(tmp_path):
    """Compiled Python (a __pycache__ folder, a stray .pyc) is skipped like the .py beside it: a
    folder of traces and scripts ingests its traces and refuses nothing; a rank folder stays one
    run."""
    d = _rank_folder(tmp_path, [1, 0])
    for folder in (tmp_path, d):
        (folder / "__pycache__").mkdir()
        (folder / "__pycache__" / "trim.cpython-311.pyc").write_bytes(b"\xa7\r\r\n" + bytes(12))
    (tmp_path / "old.pyc").write_bytes(b"\xa7\r\r\n" + bytes(12))
    (tmp_path / "trim.py").write_text("pass\n")
    assert ingest.rank_files(d) is not None
    assert expand_paths([tmp_path]) == [d]
