"""Bounded input and isolated readers: streaming decompression with a cap, the .ncu-rep reader in a
child process (a crash, a hang or a memory blow-up is one refusal; its temporary copy is gone), the
report's block structure, SQLite opened read-only with real tables only and a time limit, caps on
nesting, numbers and names."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pytest

from collectors.decompress import gunzip_if_needed
from collectors.errors import ArtifactError
from collectors.ingest import parse_bytes
from tests.conftest import H200_KERNELS, H200_TORCH, REPO, SAMPLES

BASIC = gzip.decompress((H200_KERNELS / "basic.ncu-rep.gz").read_bytes())


def blocks(d: bytes) -> list[bytes]:
    from tests.fuzz.mutate import _blocks

    return _blocks(d)


def one_line(e: ArtifactError) -> str:
    s = str(e)
    assert "\n" not in s
    return s


# ---- decompression
# --------------------------------------------------------------------------------


def test_gzip_members_truncation_and_trailing_bytes():
    data = b"x" * 100_000
    g = gzip.compress(data)
    assert gunzip_if_needed(g, "a.gz") == (data, "a")
    assert (
        gunzip_if_needed(g + gzip.compress(b"yz"), "a.gz")[0] == data + b"yz"
    )  # as gzip(1) reads them
    # zero padding
    assert gunzip_if_needed(g + b"\0" * 16, "a.gz")[0] == data
    for bad, said in (
        (g[:-6], "truncated"),
        (g + b"junk", "data after the end"),
        (g[:30] + b"\xff" * 8 + g[38:], "corrupt"),
    ):
        with pytest.raises(ArtifactError, match=said):
            gunzip_if_needed(bad, "a.gz")


def test_a_gzip_bomb_is_refused_at_the_cap_without_holding_it(tmp_path):
    """1 GiB of zeros in 1 MB: refused at a 100 MB cap; the process' peak memory stays far below the output."""
    code = (
        "import resource, zlib, sys; sys.path.insert(0, sys.argv[1])\n"
        "from collectors.decompress import gunzip_if_needed\nfrom collectors.errors import "
        "ArtifactError\n"
        "c = zlib.compressobj(9, zlib.DEFLATED, 31)\n"
        "bomb = b''.join(c.compress(b'\\0' * (1 << 24)) for _ in range(64)) + c.flush()\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    gunzip_if_needed(bomb, 'b.gz', limit=100_000_000)\nexcept ArtifactError as "
        "e:\n    print(e)\n"
        "print('PEAK_MB', (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, timeout=300
    )
    assert "decompresses to more than 100 MB" in r.stdout, r.stdout + r.stderr
    grew = float(r.stdout.split("PEAK_MB")[1])
    assert grew < 150, f"{grew:.0f} MB more at the peak"


def test_the_artifact_cap_applies_to_plain_files_and_folders(tmp_path, monkeypatch):
    from collectors.ingest import read_path

    monkeypatch.setenv("KERNELSCOPE_MAX_DECOMPRESSED_MB", "0.01")  # 10 kB
    p = tmp_path / "big.csv"
    p.write_bytes(b"x" * 20_000)
    with pytest.raises(ArtifactError, match="is more than 10 kB"):
        read_path(p)
    with pytest.raises(ArtifactError, match="decompresses to more than 10 kB"):
        parse_bytes(gzip.compress(b"{" * 20_000), "t.json.gz")

    from collectors.decompress import mapped

    p.write_bytes(b"[" * 20_000)
    with pytest.raises(ArtifactError, match="is more than 10 kB"):
        with mapped(p, p.name):
            pass


def test_only_a_plain_regular_file_is_mapped_and_the_map_is_private(tmp_path):
    """collectors.decompress.mapped: gzip, empty files and what is not a regular file are read in
    chunks instead (None); a plain file's map is this process's copy: a write into it never reaches
    the file."""
    from collectors.decompress import mapped

    plain, gz, empty = tmp_path / "t.json", tmp_path / "t.json.gz", tmp_path / "e.json"
    plain.write_bytes(b'{"traceEvents": []}')
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    empty.write_bytes(b"")
    for p in (gz, empty, tmp_path):
        if p.is_dir():
            with pytest.raises(OSError):
                with mapped(p, p.name):
                    pass
            continue
        with mapped(p, p.name) as m:
            assert m is None, p
    with mapped(plain, plain.name) as m:
        assert m[:] == plain.read_bytes()
        m[0] = ord("[")
        assert m[:1] == b"["
    assert plain.read_bytes() == b'{"traceEvents": []}'


# ---- the .ncu-rep reader in a child process
# -------------------------------------------------------------


def _sandbox_dirs() -> set[str]:
    """This process's reader folders (other test workers may be reading at the same time)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"ks-sandbox-*-{os.getpid()}-*")}


def test_a_report_that_aborts_nvidias_reader_is_one_refusal_and_leaves_no_temporary_copy():
    """Block 13 deleted: NVIDIA's library aborts the process (SIGABRT). In the child, that is one line here."""
    pytest.importorskip("ncu_report")
    from collectors.sandbox import run_reader

    bl = blocks(BASIC)
    broken = BASIC[:4] + b"".join(bl[:13] + bl[14:])
    before = _sandbox_dirs()
    with pytest.raises(ArtifactError) as e:
        # the container check bypassed on purpose
        run_reader("ncu-rep", broken, "x.ncu-rep", ".ncu-rep")
    assert "crashed on it (SIGABRT)" in one_line(e.value)
    assert _sandbox_dirs() == before
    # through the normal path the container check refuses it before the reader runs
    with pytest.raises(ArtifactError, match="block 13 is not a block header|has .* bytes"):
        parse_bytes(broken, "x.ncu-rep")


def test_the_readers_time_and_memory_limits(monkeypatch):
    pytest.importorskip("ncu_report")
    from collectors.sandbox import run_reader

    # the child cannot even start in 10 ms
    monkeypatch.setenv("KERNELSCOPE_NCU_SECONDS", "0.01")
    t = time.monotonic()
    with pytest.raises(ArtifactError, match="longer than 0.01 s"):
        run_reader("ncu-rep", BASIC, "x.ncu-rep", ".ncu-rep")
    assert time.monotonic() - t < 15
    monkeypatch.setenv("KERNELSCOPE_NCU_SECONDS", "300")
    monkeypatch.setenv("KERNELSCOPE_NCU_MEMORY_MB", "100")
    full = gzip.decompress((H200_KERNELS / "full.ncu-rep.gz").read_bytes())
    with pytest.raises(ArtifactError, match="needs more than 100 MB of memory"):
        run_reader("ncu-rep", full, "x.ncu-rep", ".ncu-rep")


def test_a_report_read_in_the_child_is_the_same_as_in_process():
    pytest.importorskip("ncu_report")
    from collectors import ncu

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.ncu-rep"
        p.write_bytes(BASIC)
        whole = ncu.read_report_file(str(p), "r.ncu-rep")
    direct = whole["launches"]
    child, sections, source = ncu._parse_report(BASIC, "r.ncu-rep")
    # the sections and source level too
    assert sections == whole["sections"] and sections
    assert source == orjson.loads(orjson.dumps(whole["source"]))
    assert [i for i, _ in child] == [i for i, _ in direct]
    assert [sorted(m) for _, m in child] == [sorted(m) for _, m in direct]
    assert all(
        list(child[k][1][n]) == list(direct[k][1][n]) or child[k][1][n][0] != child[k][1][n][0]
        for k in range(len(direct))
        for n in direct[k][1]
    )


# ---- the report's block structure
# ---------------------------------------------------------------------


def test_block_damage_and_cuts_are_refused_before_the_reader():
    from collectors.ncu_container import walk

    assert walk(BASIC, "r") == 9
    bl, head = blocks(BASIC), BASIC[:4]
    refused = {
        # the 1-of-9-kernels report
        "cut after the first kernel": head + b"".join(bl[:6]),
        "cut inside the session blocks": head + b"".join(bl[:9]),
        "cut after a source block": head + b"".join(bl[:15]),
        "cut inside a block": BASIC[: len(BASIC) - 1000],
        "a header deleted": head + b"".join(bl[:15] + bl[16:]),
        "a payload duplicated": head + b"".join(bl[:17] + [bl[16]] + bl[17:]),
        "two blocks swapped": head + b"".join(bl[:15] + [bl[16], bl[15]] + bl[17:]),
        "random bytes": b"NVR\x00" + os.urandom(3000),
    }
    for what, data in refused.items():
        with pytest.raises(ArtifactError, match="truncated|corrupt|not an Nsight"):
            walk(data, "r")
    # a cut between two complete kernel results is a report of fewer kernels (the format counts
    # none): accepted
    assert walk(head + b"".join(bl[:29]), "r") == 8


# ---- SQLite
# --------------------------------------------------------------------------------------------


def _nsys(tmp_path, extra_sql: list[str]) -> bytes:
    from tests.support.nsys import two_process_export

    data = two_process_export(tmp_path)
    p = tmp_path / "m.sqlite"
    p.write_bytes(data)
    con = sqlite3.connect(p)
    for s in extra_sql:
        con.execute(s)
    con.commit()
    con.close()
    return p.read_bytes()


def test_sqlite_views_and_virtual_tables_are_refused_and_queries_have_a_time_limit(
    tmp_path, monkeypatch
):
    view = _nsys(
        tmp_path,
        [
            "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k",
            "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
            "SELECT n + 1 FROM r) SELECT k.* FROM k, r",
        ],
    )
    t = time.monotonic()
    with pytest.raises(ArtifactError, match="CUPTI_ACTIVITY_KIND_KERNEL is a view, not a table"):
        parse_bytes(view, "v.sqlite")
    assert time.monotonic() - t < 10
    virtual = _nsys(
        tmp_path, ["DROP TABLE StringIds", "CREATE VIRTUAL TABLE StringIds USING fts4(id, value)"]
    )
    with pytest.raises(ArtifactError, match="StringIds is a virtual table"):
        parse_bytes(virtual, "v.sqlite")
    # a real table whose rows are expensive to read: the progress handler stops the queries at the
    # limit
    slow = _nsys(
        tmp_path,
        ["INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME"] * 17,
    )
    monkeypatch.setenv("KERNELSCOPE_SQLITE_SECONDS", "0.05")
    with pytest.raises(ArtifactError, match="queries took longer than 0.05 s"):
        parse_bytes(slow, "slow.sqlite")


def test_sqlite_is_read_from_an_immutable_read_only_copy(tmp_path):
    """A trigger or a write in the export can do nothing: the connection is read-only (query_only)."""
    data = _nsys(
        tmp_path,
        [
            "CREATE TABLE audit (x)",
            "CREATE TRIGGER t AFTER INSERT ON StringIds BEGIN INSERT INTO audit VALUES (1); END",
        ],
    )
    parsed = parse_bytes(data, "t.sqlite")
    assert parsed.kind == "nsys" and parsed.meta["item_count"] == 4


# ---- caps and validation
# --------------------------------------------------------------------------------


def test_deep_nesting_and_huge_numbers_are_one_line_refusals():
    bench = json.loads(
        gzip.decompress(sorted(SAMPLES.glob("h200/bench_suite/*.json.gz"))[0].read_bytes())
    )
    deep = json.dumps(bench).replace(
        '"params": {', '"params": {"x": ' + "[" * 1100 + "]" * 1100 + ", ", 1
    )
    for data, said in (
        (deep.encode(), "not valid JSON|nested deeper"),
        (
            json.dumps(bench).replace('"n": ', '"n": ' + "9" * 400 + ', "m": ', 1).encode(),
            "not valid JSON|n =",
        ),
        (b'{"traceEvents": ' + b"[" * 5000 + b"]" * 5000 + b"}", "JSON|not a trace|traceEvents"),
    ):
        with pytest.raises(ArtifactError, match=said) as e:
            parse_bytes(data, "x.json")
        one_line(e.value)


def test_a_raw_csv_with_trailing_blank_lines_is_read():
    raw = gzip.decompress((H200_KERNELS / "basic_raw.csv.gz").read_bytes())
    assert parse_bytes(raw + b"\n\n\n", "r.csv").meta["item_count"] == 9


def _raw_with(metric: str, value: str, launch: int = 1, name: str = "basic_raw.csv.gz") -> bytes:
    import csv
    import io

    rows = list(
        csv.reader(io.StringIO(gzip.decompress((H200_KERNELS / name).read_bytes()).decode()))
    )
    c = rows[0].index(metric)
    rows[2 + launch][c] = value
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


@pytest.mark.parametrize(
    "metric",
    [
        "launch__block_size",
        "launch__registers_per_thread",
        "launch__shared_mem_per_block_static",
        "gpu__time_duration.sum",
    ],
)
@pytest.mark.parametrize("value", ["inf", "-1", "1e308", "nan"])
def test_impossible_launch_values_are_refused_not_stored(metric, value, store):
    """The issue's 35 mutants: a launch value of inf, NaN, -1 or 1e308 made `analyze` raise for
    every page; now the file is refused in one line naming the launch and the value, and nothing is
    stored."""
    from dashboard.core.source import Source

    data = _raw_with(metric, value)
    with pytest.raises(ArtifactError) as e:
        Source(store).ingest_bytes(data, "m.csv")
    msg = one_line(e.value)
    assert "launch 1" in msg or "duration" in msg or "no kernel" in msg, msg
    assert not (store.root / "runs").exists() or not any((store.root / "runs").iterdir())


def test_zero_block_size_is_refused_and_a_launch_the_gpu_cannot_run_is_flagged(store, capsys):
    from dashboard.cli import main
    from dashboard.core.source import Source

    with pytest.raises(ArtifactError, match="block_size = 0|not the block dimensions"):
        Source(store).ingest_bytes(_raw_with("launch__block_size", "0"), "z.csv")
    # 255 registers x 1024 threads: within CUDA's limits, not the H200's 65,536 registers per block
    # -> flagged
    data = _raw_with("launch__registers_per_thread", "255", launch=3)
    p = store.root.parent / "regs.csv"
    p.write_bytes(data)
    assert main(["analyze", str(p), "--format", "json", "--store", str(store.root)]) == 0
    rep = json.loads(capsys.readouterr().out)
    flagged = {f["id"]: f["flags"] for f in rep["flagged"]}
    assert list(flagged) == [3] and "registers per block" in flagged[3][0]
    assert main(["analyze", str(p), "--store", str(store.root)]) == 0
    assert "FLAGGED launch 3" in capsys.readouterr().out


def test_dram_bandwidth_above_the_spec_peak_is_flagged_and_the_flag_flips(store, capsys):
    from dashboard.cli import main

    raw = gzip.decompress((H200_KERNELS / "full_raw_base.csv.gz").read_bytes()).decode()
    for factor, flagged in ((1.0, False), (1000.0, True)):
        p = store.root.parent / f"bw{factor:g}.csv"
        import csv
        import io

        rows = list(csv.reader(io.StringIO(raw)))
        c = rows[0].index("dram__bytes_read.sum")
        rows[2][c] = str(float(rows[2][c].replace(",", "")) * factor)
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        p.write_text(buf.getvalue())
        assert main(["analyze", str(p), "--format", "json", "--store", str(store.root)]) == 0
        rep = json.loads(capsys.readouterr().out)
        ids = {f["id"] for f in rep["flagged"]}
        assert (0 in ids) == flagged, rep["flagged"]


def test_nsys_ops_that_end_before_they_start_or_lack_a_device_are_refused(tmp_path):
    from tests.support.nsys import build_nsys

    for kernels, said in (
        ([(5_000, 3_000, 0, 7, 5, 100, "k")], "ends before it starts"),
        ([(1_000, 3_000, None, 7, 5, 100, "k")], "without a device id"),
    ):
        data = build_nsys(
            tmp_path, kernels=kernels, runtime=[(900, 950, 100, 1, 5, "cudaLaunchKernel")]
        )
        with pytest.raises(ArtifactError, match=said):
            parse_bytes(data, "n.sqlite")


def test_kineto_negative_durations_are_refused():
    d = json.loads(gzip.decompress((H200_TORCH / "ffn_M1_eager.json.gz").read_bytes()))
    k = next(e for e in d["traceEvents"] if e.get("cat") == "kernel")
    k["dur"] = -5
    with pytest.raises(ArtifactError, match="negative"):
        parse_bytes(json.dumps(d).encode(), "t.json")


def test_a_name_longer_than_the_string_limit_is_refused_by_its_characters_not_its_bytes(
    monkeypatch,
):
    """A kernel name over MAX_STRING_CHARS characters is one refusal naming the table and the
    column; a name of more bytes than that but no more characters (UTF-8 text) is read, and the
    limit's edge is exact."""
    from collectors import validate

    d = json.loads(gzip.decompress((H200_TORCH / "ffn_M1_eager.json.gz").read_bytes()))
    # above every name the trace has
    n = 1 + max(len(str(e.get("name", ""))) for e in d["traceEvents"])
    monkeypatch.setattr(validate, "MAX_STRING_CHARS", n)
    k = next(e for e in d["traceEvents"] if e.get("cat") == "kernel")
    for name, refused in (
        ("é" * n, False),
        ("k" * n, False),
        ("k" * (n + 1), True),
        ("é" * (n + 1), True),
    ):
        k["name"] = name
        data = json.dumps(d, ensure_ascii=False).encode()
        if refused:
            with pytest.raises(
                ArtifactError,
                match=rf"gpu_ops: a name of {n + 1:,} characters "
                rf"\(the limit is {n:,}\)",
            ):
                parse_bytes(data, "t.json")
        else:
            assert name in parse_bytes(data, "t.json").table("gpu_ops")["name"].to_list()


#: (table, column, value written into its last row, what the refusal says): every check of a
#: timeline's tables
TIMELINE_FAULTS = [
    (
        "gpu_ops",
        "start_ns",
        (1 << 62) + 1,
        r"gpu_ops row \(.*\): start_ns = 4611686018427387905 ns "
        r"\(beyond any real",
    ),
    (
        "cpu_ops",
        "end_ns",
        -(1 << 62) - 1,
        r"cpu_ops row .*: end_ns = -4611686018427387905 ns "
        r"\(beyond any real clock",
    ),
    ("api_calls", "end_ns", "start-1", r"api_calls row \(.*\) ends before it starts"),
    ("cpu_ops", "duration_ns", -1, r"cpu_ops row .*: duration_ns = -1 ns \(a negative duration\)"),
    ("gpu_ops", "device", None, r"1 GPU op\(s\) without a device id"),
    ("gpu_ops", "stream", None, r"1 GPU op\(s\) without a stream"),
    ("gpu_ops", "name", None, r"1 GPU op\(s\) without a name"),
    ("api_calls", "rank", None, r"1 API call\(s\) without a process \(rank\)"),
    ("gpu_ops", "device", 1 << 21, r"device = 2097152 \(not a device ordinal\)"),
    ("gpu_ops", "block_x", 2000, r"block_x = 2000 \(CUDA allows 1\.\.1,024\)"),
    ("gpu_ops", "block_z", 65, r"block_z = 65 \(CUDA allows 1\.\.64\)"),
    ("gpu_ops", "grid_y", 70_000, r"grid_y = 70000 \(CUDA allows 1\.\.65,535\)"),
    (
        "gpu_ops",
        "registers_per_thread",
        256,
        r"registers_per_thread = 256 \(CUDA allows at most "
        r"255\)",
    ),
    (
        "gpu_ops",
        "shared_memory_bytes",
        300_000,
        r"shared_memory_bytes = 300000 bytes per block "
        r"\(above any GPU\)",
    ),
    ("gpu_ops", "bytes", -1, r"bytes = -1 \(a negative size\)"),
]


@pytest.mark.parametrize(
    "table,column,value,said", TIMELINE_FAULTS, ids=[f"{t}.{c}" for t, c, *_ in TIMELINE_FAULTS]
)
def test_each_timeline_check_refuses_one_bad_value_of_a_real_trace(table, column, value, said):
    """The timeline checks run as one query per table, then one by one only when that query finds
    something (collectors.validate._timeline_sound): one bad value in the last row of a real trace's
    table is still refused, with the message of its own check, and the trace as recorded passes."""
    from collectors.ingest import parse_path
    from collectors.validate import _timeline_sound, validate

    parsed = parse_path(H200_TORCH / "ffn_M1_eager.json.gz")
    assert _timeline_sound(parsed) and validate(parsed, "t.json") is parsed
    df = parsed.tables[table]
    last = df.height - 1
    if value == "start-1":
        value = df["start_ns"][last] - 1
    parsed.tables[table] = df.with_columns(df[column].scatter(last, value))
    assert not _timeline_sound(parsed)
    with pytest.raises(ArtifactError, match=said):
        validate(parsed, "t.json")
