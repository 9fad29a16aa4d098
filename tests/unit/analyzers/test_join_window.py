"""The join's window search (analyzers.join._contiguous_window) counts each offset's matches by
votes from the ncu launches' keys; it must pick what comparing every offset launch by launch picks
(the reference below), ties broken the same way (the hinted step, then the first)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.join import _contiguous_window


def _reference(ncu_keys, keys, steps, hint):
    n = len(ncu_keys)
    if n < 2 or len(keys) < n:
        return None
    best, best_off = (0, False), None
    for off in range(len(keys) - n + 1):
        score = (sum(1 for i in range(n) if keys[off + i] == ncu_keys[i]), steps[off] == hint)
        if score > best:
            best, best_off = score, off
    if best_off is None or best[0] < 0.9 * n:
        return None
    return [(i, best_off + i) for i in range(n) if keys[best_off + i] == ncu_keys[i]], steps[
        best_off
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcd"), min_size=0, max_size=60),
    st.integers(0, 40),
    st.integers(1, 12),
    st.integers(0, 3),
    st.sampled_from([None, 0, 1, 2]),
    st.integers(0, 2),
)
def test_votes_pick_what_comparing_every_offset_picks(trace, start, n, noise, hint, per_step):
    keys = trace
    steps = [i // (per_step + 3) for i in range(len(keys))]
    ncu = keys[start : start + n]
    # a few launches the trace does not have
    ncu = [("z" if i < noise else k) for i, k in enumerate(ncu)]
    k = pl.DataFrame({"key": keys, "step": steps}, schema={"key": pl.String, "step": pl.Int64})
    assert _contiguous_window(ncu, k, hint) == _reference(ncu, keys, steps, hint)
