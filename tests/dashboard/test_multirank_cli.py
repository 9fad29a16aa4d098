"""`kernelscope analyze FOLDER | GLOB | RUN` on multi-rank inputs: Kineto rank traces (the real 8-rank DLRM set),
Nsight Systems exports (one per rank, or one with several processes, built from the documented schema), the
`ranks` / `iterations` sections, bad rank files, and a stored run giving the folder's numbers."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

import pytest

from tests.support.nsys import build_nsys
from tests.conftest import REPO

DLRM = REPO / "tests" / "corpus" / "param" / "dlrm_8rank"
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def ks(capsys):
    """kernelscope in this process (as `main` runs it), with its exit code and output."""
    from dashboard.cli import main

    def run(*args) -> Result:
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out = capsys.readouterr()
        return Result(rc, out.out, out.err)

    return run


def numbers(rep: dict) -> dict:
    return {
        "iterations": [{k: v for k, v in it.items()} for it in rep["iterations"]],
        "ranks": [
            {
                k: v
                for k, v in r.items()
                if k not in ("source", "worker_seconds", "worker_peak_rss_bytes")
            }
            for r in rep["ranks"]
        ],
        "collectives": rep["collectives"],
        "iteration_times": rep["iteration_times"],
    }


def nsys_rank(
    tmp_path, pids_compute: dict[int, int], steps: int = 3, slowest: int | None = None
) -> bytes:
    """An nsys export of processes (pid -> compute ns per iteration): per iteration an NVTX range
    'step N', a launch call and a compute kernel, then an NCCL all-reduce that every rank of the job
    leaves together, 5 us after the slowest (`slowest` ns of compute, by default this export's own)
    arrives."""
    kernels, runtime, nvtx = [], [], []
    corr = 1
    for i in range(steps):
        t0 = 1_000_000 + i * 1_000_000
        sync = t0 + 200 + (slowest or max(pids_compute.values())) + 5_000
        for pid, c in pids_compute.items():
            runtime.append((t0 + 100, t0 + 150, pid, pid, corr, "cudaLaunchKernel"))
            kernels.append(
                (t0 + 200, t0 + 200 + c, 0, 7, corr, pid, "void gemm_kernel<float>(float*)")
            )
            corr += 1
            runtime.append((t0 + 160, t0 + 190, pid, pid, corr, "cudaLaunchKernel"))
            kernels.append((t0 + 200 + c, sync, 0, 20, corr, pid, AR))
            corr += 1
            nvtx.append((t0, sync + 20_000, pid, pid, f"step {i}"))
    return build_nsys(tmp_path, kernels=kernels, runtime=runtime, nvtx=nvtx)


def test_kineto_rank_folder_json_csv_table(tmp_path, ks):
    s = str(tmp_path / "s")
    r = ks("analyze", str(DLRM), "--format", "json", "--store", s)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["kind"] == "ranks" and rep["summary"]["rank_count"] == 8
    assert [x["rank"] for x in rep["ranks"]] == list(range(8))
    it = rep["iterations"][0]
    assert (it["step"], it["straggler_rank"], it["cause"]) == (10, 7, "host/launch")
    assert [p["rank"] for p in it["per_rank"]] == list(range(8))
    assert {c["kind"] for c in rep["collectives"]} == {"send_recv", "all_reduce"}
    assert rep["execution"]["tasks"] == 8 and rep["execution"]["failures"] == []
    # per-kernel rows are not gathered across ranks
    assert "kernels" not in rep
    r = ks("analyze", str(DLRM / "*.json.gz"), "--format", "csv", "--store", s)  # a glob
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and len(lines) == 1 + 8 and lines[0].startswith("step,rank,step_ns")
    r = ks("analyze", str(DLRM), "--store", s)
    assert r.returncode == 0 and "per rank" in r.stdout and "host/launch" in r.stdout
    assert "analysed 8 rank source(s) on serial" in r.stderr


def test_a_bad_rank_file_is_named_and_the_others_analysed(tmp_path, ks):
    d = tmp_path / "ranks"
    shutil.copytree(DLRM, d)
    (d / "worker9.json").write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": '
    )
    r = ks("analyze", str(d), "--format", "json", "--store", str(tmp_path / "s"))
    assert r.returncode == 1
    assert f"kernelscope: {d / 'worker9.json'}: not valid JSON (" in r.stderr
    assert json.loads(r.stdout)["summary"]["rank_count"] == 8
    empty = tmp_path / "empty"
    empty.mkdir()
    r = ks("analyze", str(empty), "--store", str(tmp_path / "s"))
    assert r.returncode == 1 and r.stderr.strip().endswith(
        "no rank traces (PyTorch profiler .json/.json.gz, Nsight Systems .sqlite/.nsys-rep)"
    )


def test_nsys_one_export_per_rank_and_one_export_with_processes(tmp_path, ks):
    d = tmp_path / "nsys"
    d.mkdir()
    for r, c in enumerate([10_000, 16_000, 10_500]):
        (d / f"train_rank{r}.sqlite").write_bytes(nsys_rank(tmp_path, {100 + r: c}, slowest=16_000))
    r = ks("analyze", str(d), "--format", "json", "--store", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [x["rank"] for x in rep["ranks"]] == [0, 1, 2]
    assert "ranks taken from the file names" in rep["execution"]["notes"][0]
    assert rep["step_patterns"] and len(rep["iterations"]) == 3
    for it in rep["iterations"]:
        assert (it["straggler_rank"], it["cause"], it["found_by"]) == (
            1,
            "compute",
            "collective waits",
        )
        assert it["lateness_ns"] == pytest.approx((6_000 + 5_500) / 2)
    one = tmp_path / "one"
    one.mkdir()
    # two processes: 2 ranks
    (one / "job.sqlite").write_bytes(nsys_rank(tmp_path, {100: 10_000, 101: 16_000}))
    rep = json.loads(
        ks("analyze", str(one), "--format", "json", "--store", str(tmp_path / "s")).stdout
    )
    assert [r["rank"] for r in rep["ranks"]] == [0, 1] and rep["iterations"][0][
        "straggler_rank"
    ] == 1


def test_repeated_ranks_are_one_clear_line(tmp_path, ks):
    d = tmp_path / "dup"
    d.mkdir()
    for n in ("a", "b"):
        shutil.copy(DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz", d / f"{n}.json.gz")
    (d / "c.json.gz").write_bytes(
        (DLRM / "worker1_step_12.1694128201556.pt.trace.json.gz").read_bytes()
    )
    r = ks("analyze", str(d), "--store", str(tmp_path / "s"))
    assert (
        r.returncode == 1
        and "rank 0 appears twice" in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
    )


def _json(r: Result) -> dict:
    """The command's JSON; on failure its exit code and error output say why."""
    assert r.returncode == 0 and r.stdout.strip(), (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout)


def test_a_stored_rank_folder_gives_the_folders_numbers(tmp_path, ks):
    s = str(tmp_path / "s")
    folder = _json(ks("analyze", str(DLRM), "--format", "json", "--store", s))
    r = ks("ingest", str(DLRM), "--store", s)
    assert r.returncode == 0, r.stderr[-3000:]
    rid = r.stdout.split()[0]
    stored = _json(ks("analyze", rid, "--format", "json", "--store", s))
    # the timeline report, plus the sections
    assert stored["kind"] == "kineto" and len(stored["kernels"]) > 0
    assert numbers(stored) == numbers(folder)
    pooled = _json(ks("analyze", rid, "--format", "json", "--workers", "2", "--store", s))
    # each rank read from the store by a worker
    assert numbers(pooled) == numbers(folder)
    names = [r["source"] for r in stored["ranks"]]  # each rank's own trace name
    assert len(set(names)) == 8 and all(f"worker{i}_" in n for i, n in enumerate(names))


def test_step_option_and_one_rank_file(tmp_path, ks):
    f = DLRM / "worker3_step_12.1694128201557.pt.trace.json.gz"
    rep = json.loads(
        ks("analyze", str(f), "--format", "json", "--store", str(tmp_path / "s")).stdout
    )
    assert [r["rank"] for r in rep["ranks"]] == [3] and rep["iterations"][0][
        "verdict"
    ] == "one rank"
    rep = json.loads(
        ks(
            "analyze",
            str(f),
            "--format",
            "json",
            "--step",
            r"^nccl:all_(\w+)$",
            "--store",
            str(tmp_path / "s"),
        ).stdout
    )
    # no such range names a number: the whole trace
    assert [i["step"] for i in rep["iterations"]] == [-1]
    r = ks("analyze", str(f), "--step", "ProfilerStep", "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and "needs a group that captures the step number" in r.stderr
    rep = json.loads(
        ks(
            "analyze",
            str(f),
            "--format",
            "json",
            "--step",
            r"^ProfilerStep#(\d+)$",
            "--store",
            str(tmp_path / "s"),
        ).stdout
    )
    assert [i["step"] for i in rep["iterations"]] == [10]


def test_ray_takes_an_optional_address():
    from dashboard.cli import ray_argv

    assert ray_argv(["analyze", "d", "--ray"]) == ["analyze", "d", "--ray", "auto"]
    # a path, not an address
    assert ray_argv(["analyze", "--ray", "d/"]) == ["analyze", "--ray", "auto", "d/"]
    assert ray_argv(["analyze", "d", "--ray", "--workers", "2"]) == [
        "analyze",
        "d",
        "--ray",
        "auto",
        "--workers",
        "2",
    ]
    for addr in ("10.0.0.5:6379", "head-node:6379", "ray://head:10001", "local", "auto"):
        assert ray_argv(["bench", "--ray", addr]) == ["bench", "--ray", addr]


def test_executor_choice():
    from dashboard.core import execute

    assert isinstance(execute.make_executor(total_bytes=10 << 20, tasks=8), execute.SerialExecutor)
    assert isinstance(execute.make_executor(total_bytes=1 << 30, tasks=8), execute.PoolExecutor)
    assert isinstance(
        execute.make_executor(total_bytes=10 << 20, tasks=8, workers=2), execute.PoolExecutor
    )
    assert isinstance(execute.make_executor(total_bytes=1 << 30, tasks=1), execute.SerialExecutor)


@pytest.mark.shared_data
def test_a_real_two_gpu_nsys_export(ks, tmp_path):
    """The real 2-GPU training export (../shared/data/nsys, NCCL send/recv, one nsys session: one
    clock). The rank with the shorter kernel of each shared instance is the one that started it
    later by the clock."""
    import polars as pl

    from analyzers.distributed import rank_summary
    from analyzers.stragglers import instances
    from collectors.ingest import parse_path
    from tests.conftest import SHARED_NSYS

    f = SHARED_NSYS / "mfu_2gpu_before.sqlite"
    rep = json.loads(ks("analyze", f, "--format", "json", "--store", tmp_path / "s").stdout)
    assert [r["rank"] for r in rep["ranks"]] == [0, 1] and [
        r["comm_kernel_count"] for r in rep["ranks"]
    ] == [33, 33]
    assert rep["collective_instances"]["synchronising"] >= 30
    it = rep["iterations"][0]
    assert (it["step"], it["straggler_rank"], it["found_by"]) == (-1, 1, "collective waits")
    p = parse_path(f)
    ev = pl.concat(
        [
            rank_summary(
                p.tables["gpu_ops"].filter(pl.col("rank") == r),
                p.tables["nvtx"].filter(pl.col("rank") == r),
                rank=r,
            ).events
            for r in (0, 1)
        ]
    )
    sync = instances(ev).filter(pl.col("synchronising"))
    latest = (
        ev.sort("start_ns", descending=True)
        .group_by("step", "kind", "occurrence")
        .agg(pl.col("rank").first().alias("latest"))
    )
    j = sync.join(latest, on=["step", "kind", "occurrence"])
    assert j.height == sync.height and (j["last_rank"] == j["latest"]).all()
