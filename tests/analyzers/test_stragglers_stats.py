"""The multi-rank statistics and interval arithmetic, written without numpy so that a short command
need not import it, against numpy's own functions and the numpy code they replaced, value for value
(bit for bit for floats)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from analyzers import distributed
from analyzers import stragglers

ROOT = Path(__file__).resolve().parents[2]

# values as they reach the statistics: integer ns (any size), or floats (medians, waits)
ints = st.integers(0, 2**62)
finite = st.floats(min_value=-1e18, max_value=1e18, allow_nan=False)
values = st.one_of(
    st.lists(ints, min_size=1, max_size=300),
    st.lists(finite, min_size=1, max_size=300),
    st.lists(st.integers(0, 10**9), min_size=100, max_size=2000),
)


def _numpy_stats(x: np.ndarray) -> dict:
    """What stragglers._stats computed with numpy before it was rewritten (the same code)."""
    q = lambda p: float(np.quantile(x, p, method="nearest"))  # noqa: E731
    mean = float(np.mean(x))
    std = float(np.std(x))
    return {
        "count": int(len(x)),
        "min_ns": float(np.min(x)),
        "p10_ns": q(0.1),
        "median_ns": q(0.5),
        "p90_ns": q(0.9),
        "p99_ns": q(0.99),
        "max_ns": float(np.max(x)),
        "mean_ns": mean,
        "std_ns": std,
        "cv": std / mean if mean else None,
    }


def _numpy_histogram(x: np.ndarray, bins: int = stragglers.HISTOGRAM_BINS) -> list[dict]:
    lo, hi = float(np.min(x)), float(np.max(x))
    if hi <= lo:
        return [{"lo_ns": lo, "hi_ns": hi, "count": int(len(x))}]
    counts, edges = np.histogram(x, bins=bins, range=(lo, hi))
    return [
        {"lo_ns": float(edges[i]), "hi_ns": float(edges[i + 1]), "count": int(c)}
        for i, c in enumerate(counts)
    ]


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN, and floats equal bit for bit (0.0 and -0.0 differ)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    return a == b and type(a) is type(b)


@settings(max_examples=400, deadline=None)
@given(values)
def test_stats_are_numpys_bit_for_bit(xs):
    """Mean and standard deviation follow numpy's pairwise summation: summing left to right, or
    starting from the first value instead of 0, differs in the last bits for about half of the float
    lists; quantiles round the rank half to even, as np.around (half up fails n = 6, p = 0.1)."""
    with np.errstate(all="ignore"):
        want = _numpy_stats(np.asarray(xs, dtype=np.float64))
    got = stragglers._stats(xs)
    assert got.keys() == want.keys()
    for k in want:
        assert _same(got[k], want[k]), (k, got[k], want[k])


@pytest.mark.parametrize(
    "xs",
    [
        [1, 2, 3, 4, 5, 6],
        [5, 1, 4, 2, 6, 3],
        [10] * 7,
        [2**53 + 1, 3, 2**53 + 3],
        [7],
        [0.1 * i for i in range(201)],
        list(range(1000, 0, -3)),
    ],
)
def test_stats_on_chosen_lists(xs):
    want = _numpy_stats(np.asarray(xs, dtype=np.float64))
    got = stragglers._stats(xs)
    assert all(_same(got[k], want[k]) for k in want), (got, want)


def test_stats_of_nothing():
    assert stragglers._stats([]) == {"count": 0} and stragglers._histogram([]) == []


@settings(max_examples=300, deadline=None)
@given(values, st.integers(1, 40))
def test_histogram_is_numpys(xs, bins):
    """Edges as np.linspace's and each value in the bin np.histogram puts it in (values on an edge
    go up; the maximum into the last bin)."""
    want = _numpy_histogram(np.asarray(xs, dtype=np.float64), bins)
    got = stragglers._histogram(xs, bins)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert all(_same(g[k], w[k]) for k in w), (g, w)


def test_histogram_values_on_edges():
    xs = [0, 5, 10, 15, 20, 20]  # every value on an edge of 4 bins of 5
    assert [b["count"] for b in stragglers._histogram(xs, 4)] == [1, 1, 1, 3]
    assert [b["count"] for b in stragglers._histogram(xs, 4)] == [
        b["count"] for b in _numpy_histogram(np.array(xs, float), 4)
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=30))
def test_argmax_is_the_first_largest(xs):
    f = [float(x) for x in xs]
    assert stragglers._argmax(f) == int(np.argmax(np.array(f)))


# ------------------------------------------------------------------ interval arithmetic: the numpy
# code it replaced
def _np_merge(starts, ends):
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    run_max = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], run_max[last]


def _np_covered(S_, E_, a, b):
    if len(S_) == 0:
        return np.zeros(len(a), np.int64)
    cum = np.concatenate(([0], np.cumsum(E_ - S_)))

    def upto(t):
        k = np.searchsorted(S_, t, side="right")
        j = np.maximum(k - 1, 0)
        return np.where(k > 0, cum[j] + np.minimum(t, E_[j]) - S_[j], 0)

    return np.maximum(upto(b) - upto(a), 0)


def _np_host_gaps(s, e, api):
    LO, HI = distributed._LO, distributed._HI
    if len(s) == 0:
        return [LO], [HI]
    prev_end = np.maximum.accumulate(e)
    gap_start = np.concatenate(([LO], prev_end[:-1]))
    opens = np.concatenate(([True], s[1:] > prev_end[:-1]))
    host = opens & ((api > gap_start) | (gap_start == LO))
    return np.append(gap_start[host], prev_end[-1]).tolist(), np.append(s[host], HI).tolist()


# (start, length)
intervals = st.lists(st.tuples(st.integers(-50, 400), st.integers(-20, 120)), max_size=60)
windows = st.lists(
    st.tuples(st.integers(-100, 500), st.integers(-50, 300)), min_size=1, max_size=20
)


@pytest.mark.parametrize("path", ["lists", "polars"])
def test_merge_and_covered_are_the_numpy_codes(path, monkeypatch):
    """Both ways of computing (Python lists for small inputs, polars above D.SMALL) against the
    numpy code: ties, zero and negative lengths, windows outside, empty windows and empty sets
    included."""
    monkeypatch.setattr(distributed, "SMALL", 4096 if path == "lists" else 0)

    @settings(max_examples=300, deadline=None)
    @given(intervals, windows)
    def same(iv, win):
        s = np.array([x for x, _ in iv], np.int64)
        e = np.array([x + n for x, n in iv], np.int64)
        a = np.array([x for x, _ in win], np.int64)
        b = np.array([x + n for x, n in win], np.int64)
        S_, E_ = distributed.merge(pl.Series(s, dtype=pl.Int64), pl.Series(e, dtype=pl.Int64))
        wS, wE = _np_merge(s, e)
        assert S_.dtype == E_.dtype == pl.Int64
        assert S_.to_list() == wS.tolist() and E_.to_list() == wE.tolist()
        got = distributed.covered(
            S_, E_, pl.Series(a, dtype=pl.Int64), pl.Series(b, dtype=pl.Int64)
        )
        assert got.dtype == pl.Int64 and got.to_list() == _np_covered(wS, wE, a, b).tolist()

    same()


@pytest.mark.parametrize("path", ["lists", "polars"])
def test_host_gaps_are_the_numpy_code(path, monkeypatch):
    """Gaps the host caused, both ways, against the numpy code it replaced: launches before, inside
    and after gaps, unknown launch times (null), ties and overlaps."""
    monkeypatch.setattr(distributed, "SMALL", 4096 if path == "lists" else 0)
    op = st.tuples(
        st.integers(0, 300), st.integers(0, 60), st.one_of(st.none(), st.integers(-20, 400))
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(op, max_size=40))
    def same(rows):
        ops = pl.DataFrame(
            {
                "start_ns": [r[0] for r in rows],
                "end_ns": [r[0] + r[1] for r in rows],
                "api_start_ns": [r[2] for r in rows],
            },
            schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "api_start_ns": pl.Int64},
        )
        o = ops.sort("start_ns", "api_start_ns", nulls_last=True)
        want = _np_host_gaps(
            o["start_ns"].to_numpy(),
            o["end_ns"].to_numpy(),
            o["api_start_ns"].fill_null(distributed._LO).to_numpy(),
        )
        gs, ge = distributed._host_gaps(ops)
        assert (gs.to_list(), ge.to_list()) == want

    same()


def test_a_short_trace_command_does_not_import_numpy():
    """`analyze` of a one-rank trace (its iteration breakdown and straggler table included) runs
    without numpy: importing it costs a short command 0.07-0.1 s. Fails if anything on that path
    imports numpy again."""
    trace = ROOT / "sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz"
    code = (
        "import sys; from dashboard.cli import entry; sys.argv = ['kernelscope', 'analyze', "
        "sys.argv[1], '--format', 'json']\ntry:\n    entry()\nexcept SystemExit as e:\n    assert "
        "not e.code, e.code\n"
        "sys.stderr.write('NUMPY ' + str('numpy' in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(trace)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"straggler_rank"' in r.stdout and '"rank_definitions"' in r.stdout
    assert r.stderr.strip().endswith("NUMPY False"), r.stderr[-500:]
