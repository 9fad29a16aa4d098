"""Multi-rank analysis of real multi-rank traces of the compatibility corpus (tests/corpus: the
8-rank DLRM NCCL job of facebookresearch/param, two ranks of a 128-rank job and a trace with
collective sizes from HTA's tests; licenses and provenance in its manifest.json): exposed
communication and stragglers against Holistic Trace Analysis 0.5.0's own numbers
(tests/data/multirank/hta_reference.json, made by make_hta_reference.py beside it) and against an
independent computation straight from the JSON with the standard library, including the clock-based
check of who arrived last at each collective."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from analyzers.distributed import rank_summary
from analyzers.stragglers import combine
from collectors.ingest import parse_path
from tests.support.corpus_paths import CORPUS, DLRM, NCCL_ARGS  # noqa: F401

HTA = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "multirank" / "hta_reference.json").read_text()
)
SAMPLED = CORPUS / "hta" / "multirank_128"


def ours(folder: Path):
    sums = []
    for f in sorted(folder.glob("*.json.gz")):
        p = parse_path(f)
        sums.append(
            rank_summary(p.tables["gpu_ops"], p.tables["nvtx"], rank=p.meta["rank"], source=f.name)
        )
    return sums, combine(sums)


# ----------------------------------------------------------------------------- independent (stdlib)
# computation
def _ns(x) -> int:
    """µs as written -> ns, exactly (the JSON is read with decimal numbers)."""
    return int((Decimal(x) * 1000).to_integral_value())


def raw_rank(path: Path) -> dict:
    d = json.loads(gzip.open(path).read(), parse_float=Decimal)
    ev = [e for e in d["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    dev = max(
        {e["args"]["device"] for e in gpu if e.get("cat") == "kernel"},
        key=lambda x: sum(
            _ns(e["dur"]) for e in gpu if e.get("cat") == "kernel" and e["args"]["device"] == x
        ),
    )
    gpu = [e for e in gpu if e["args"].get("device") == dev]
    iv = lambda es: [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in es]  # noqa: E731
    k = [e for e in gpu if e["cat"] == "kernel"]
    comm = [e for e in k if "nccl" in e["name"].lower()]
    steps = {
        int(e["name"].split("#")[1]): (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in ev
        if e.get("cat") == "user_annotation" and re.fullmatch(r"ProfilerStep#\d+", e["name"])
    }
    return {
        "rank": d["distributedInfo"]["rank"],
        "all": iv(gpu),
        "kernels": iv(k),
        "compute": iv([e for e in k if "nccl" not in e["name"].lower()]),
        "comm": iv(comm),
        "comm_events": [
            (
                re.search(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", e["name"]).group(1),
                _ns(e["ts"]),
                _ns(e["dur"]),
            )
            for e in sorted(comm, key=lambda e: e["ts"])
        ],
        "steps": steps,
    }


def union_in(intervals, a, b) -> int:
    """|union of intervals ∩ [a, b)| by a plain sweep."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, a), min(e, b)) for s, e in intervals if e > a and s < b):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def instances_by_clock(ranks: list[dict], step: int) -> dict:
    """(kind, k) -> per rank (start, duration) of the k-th collective of that kind inside the step."""
    out: dict = {}
    for r in ranks:
        a, b = r["steps"][step]
        seen: dict = {}
        for kind, s, d in r["comm_events"]:
            if a <= s < b:
                out.setdefault((kind, seen.get(kind, 0)), {})[r["rank"]] = (s, d)
                seen[kind] = seen.get(kind, 0) + 1
    return out


@pytest.fixture(scope="module")
def dlrm():
    return ours(DLRM), [raw_rank(p) for p in sorted(DLRM.glob("*.json.gz"))]


def test_the_corpus_manifest_gives_every_file_used_here_with_its_license():
    m = {e["file"]: e for e in json.loads((CORPUS / "manifest.json").read_text())["files"]}
    used = [*DLRM.glob("*.json.gz"), *SAMPLED.glob("*.json.gz"), NCCL_ARGS]
    assert len(used) == 11
    for p in used:
        e = m[str(p.relative_to(CORPUS))]
        assert e["license"] == "MIT" and (CORPUS / e["license_file"]).is_file() and e["source_repo"]


def test_exposed_communication_matches_an_independent_computation(dlrm):
    (sums, mr), raw = dlrm
    steps = mr.rank_steps.sort("rank")
    for r in raw:
        a, b = r["steps"][10]
        row = steps.filter(pl.col("rank") == r["rank"]).row(0, named=True)
        assert row["compute_ns"] == union_in(r["compute"], a, b)
        assert row["comm_ns"] == union_in(r["comm"], a, b)
        assert row["exposed_comm_ns"] == union_in(r["kernels"], a, b) - union_in(r["compute"], a, b)
        assert row["memcpy_ns"] == union_in(r["all"], a, b) - union_in(r["kernels"], a, b)
        assert row["step_ns"] == b - a


def test_exposed_and_overlapped_communication_match_hta(dlrm):
    """HTA's comm-comp overlap (% of the communication time under compute) and temporal breakdown, per rank."""
    (sums, mr), _ = dlrm
    ref = HTA["sets"]["param_dlrm_8rank"]
    got = {r: round(100 * f, 2) for r, f in mr.ranks.select("rank", "overlap_fraction").rows()}
    assert got == {int(k): v for k, v in ref["comm_comp_overlap_pctg"].items()}
    for row in ref["temporal_breakdown_us"]:
        t = mr.ranks.filter(pl.col("rank") == row["rank"]).row(0, named=True)
        assert t["compute_ns"] == row["compute_time(us)"] * 1000
        assert t["exposed_comm_ns"] + t["memcpy_ns"] == row["non_compute_time(us)"] * 1000
        assert t["host_wait_ns"] + t["idle_ns"] == row["idle_time(us)"] * 1000
        assert t["window_ns"] == row["kernel_time(us)"] * 1000


def test_hta_sampled_ranks_iteration_551_matches_hta():
    """HTA leaves out the last profiler step, so its numbers are iteration 551's."""
    _, mr = ours(SAMPLED)
    ref = HTA["sets"]["hta_sampled_2rank"]
    assert ref["profiler_steps"] == [551]
    it = mr.rank_steps.filter(pl.col("step") == 551)
    got = {
        r: round(100 * o / c, 2)
        for r, o, c in it.select("rank", "overlapped_comm_ns", "comm_ns").rows()
    }
    assert got == {int(k): v for k, v in ref["comm_comp_overlap_pctg"].items()}
    for row in ref["temporal_breakdown_us"]:
        t = it.filter(pl.col("rank") == row["rank"]).row(0, named=True)
        assert t["compute_ns"] == row["compute_time(us)"] * 1000
        assert t["exposed_comm_ns"] + t["memcpy_ns"] == row["non_compute_time(us)"] * 1000
    # HTA names rank 1 (its late-start metric, one candidate); here rank 1 is also the rank blamed
    # most in 551, by less than the 2 % tolerance, and most of these send/recv instances pair with
    # ranks outside the two kept
    blamed = it.sort("caused_wait_ns", descending=True)["rank"][0]
    assert blamed == ref["potential_stragglers"][0] == 1
    assert mr.iterations.filter(pl.col("step") == 551)["verdict"][0] == "balanced"
    assert mr.sync["synchronising"] < mr.sync["instances"]


def test_straggler_matches_hta_and_the_clock_based_last_arrival(dlrm):
    """On one host the clocks agree: the last rank to start each collective (absolute time) must be
    the rank with its shortest kernel (our clock-free rule), the ranks must leave it together, and
    the blame must add up."""
    (sums, mr), raw = dlrm
    inst = instances_by_clock(raw, 10)
    assert len(inst) == 8 and all(len(v) == 8 for v in inst.values())
    blame = {r["rank"]: 0.0 for r in raw}
    for (kind, k), per in inst.items():
        latest = max(per, key=lambda r: (per[r][0], -r))
        shortest = min(per, key=lambda r: (per[r][1], r))
        assert latest == shortest, (kind, k)
        ends = [s + d for s, d in per.values()]
        assert max(ends) - min(ends) <= 20_000
        dmin = per[shortest][1]
        blame[shortest] += sum(d - dmin for s, d in per.values()) / (len(per) - 1)
    got = dict(mr.rank_steps.select("rank", "caused_wait_ns").rows())
    assert got == pytest.approx(blame)
    it = mr.iterations.row(0, named=True)
    straggler = max(blame, key=blame.get)
    assert (
        it["straggler_rank"]
        == straggler
        == HTA["sets"]["param_dlrm_8rank"]["potential_stragglers"][0]
        == 7
    )
    assert it["lateness_ns"] == pytest.approx(blame[7])
    # rank 7's GPU waited longer for its host than the median rank: the cause
    hw = mr.rank_steps.sort("rank")["host_wait_ns"]
    assert it["cause"] == "host/launch" and it["cause_excess_ns"] == pytest.approx(
        hw[7] - hw.median()
    )


def test_collective_sizes_from_the_profilers_args():
    """PyTorch >= 2.1 writes the collective, element counts and dtype on NCCL kernels: HTA's own
    test trace (tests/test_trace_parse.py: 21 NCCL kernels, the longest an allreduce of 2,049,000
    floats)."""
    p = parse_path(NCCL_ARGS)
    g = p.tables["gpu_ops"]
    nccl = g.filter(pl.col("name").str.contains("nccl"))
    assert nccl.height == 21
    longest = nccl.sort("duration_ns", descending=True).row(0, named=True)
    assert (longest["collective"], longest["comm_in_nelems"], longest["comm_dtype"]) == (
        "allreduce",
        2049000,
        "Float",
    )
    s = rank_summary(g, p.tables["nvtx"], rank=0)
    c = s.collectives
    assert set(c["kind"]) == {"all_reduce", "broadcast"}
    assert c["count"].sum() == 21 and c["sized_count"].sum() == 21
    ar = c.filter((pl.col("kind") == "all_reduce") & (pl.col("size_max_bytes") == 2049000 * 4))
    assert ar.height == 1 and ar["size_bucket_bytes"][0] == 1 << 23
