"""Claims of the second seed: verdicts computed from the registry and the models."""
from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from analyzers import gpus
from analyzers.cases import CLAIM_VERDICTS, Measurement, claims
from analyzers.cases.claims import whitepaper_calc_occupancy

claims_mod = importlib.import_module("analyzers.cases.claims")   # the package attribute `claims` is the function


def by_id(**kw):
    return {c.id: c for c in claims(**kw)}


def test_every_claim_has_a_verdict_and_a_sentence():
    cs = claims()
    assert len(cs) >= 8 and len({c.id for c in cs}) == len(cs)
    for c in cs:
        assert c.verdict in CLAIM_VERDICTS and c.text and c.gpu and c.explanation.strip()
        d = c.to_json()
        assert {"id", "text", "gpu", "verdict", "explanation"} <= set(d)
    json.dumps([c.to_json() for c in cs], allow_nan=False)


def test_verdicts_of_the_reference_table():
    c = by_id()
    assert c["triton.a100_matmul_rate"].verdict == "unit-error"
    assert "100% of that peak" in c["triton.a100_matmul_rate"].explanation
    assert c["a10g.memory_spec"].verdict == "self-contradictory"
    assert "780 GB/s" in c["a10g.memory_spec"].explanation
    assert c["a10g.bandwidth_fractions"].verdict == "plausible"
    assert c["a10g.mma_sync_tflops"].verdict == "above-peak"
    assert "4.1×" in c["a10g.mma_sync_tflops"].explanation
    assert "A100 SXM4 80GB" in c["a10g.mma_sync_tflops"].explanation     # the peak the % were computed against
    assert c["occupancy.helper_defaults"].verdict == "self-contradictory"
    assert c["bank.tile_width_rule"].verdict == "refuted"
    assert c["ncu.bytes_per_request"].verdict == "unit-error"
    assert c["graph.solidification_dispatch"].verdict == "unverifiable"
    assert c["a10g.register_file"].verdict == "refuted"


def test_the_whitepaper_helper_against_the_real_calculator():
    # as written: a kernel without shared memory divides by zero; 16 KB blocks give at most 49152 // 16384 = 3
    with pytest.raises(ZeroDivisionError):
        whitepaper_calc_occupancy(32, 0, 32)
    assert whitepaper_calc_occupancy(64, 16384, 32) == 3
    rows = by_id()["occupancy.helper_defaults"].details
    b32 = next(r for r in rows if r["config"] == "B" and r["threads_per_block"] == 32)
    # A10G, 64 regs, 16 KiB + 1 KiB reserved: 102400 / 17408 = 5 blocks (the table claims 16, the helper 3)
    assert (b32["claimed_blocks"], b32["helper_blocks"], b32["real_blocks"]) == (16, 3, 5)
    a32 = next(r for r in rows if r["config"] == "A" and r["threads_per_block"] == 32)
    assert a32["helper_blocks"] == "ZeroDivisionError" and a32["real_blocks"] == 16   # CC 8.6 block limit
    assert "max_threads_per_sm=1024 (A10G: 1536)" in by_id()["occupancy.helper_defaults"].explanation


def test_verdicts_follow_the_registry(monkeypatch):
    """Not hard-coded: with a (hypothetical) A10G of 300 TFLOP/s and 60 SMs the verdicts change."""
    real = gpus.get_gpu("A10G")
    fake = dataclasses.replace(real, bf16_dense_flop_per_s=300e12, sm_count=60)
    monkeypatch.setattr(claims_mod, "get_gpu", lambda name: fake if name == "A10G" else gpus.get_gpu(name))
    c = by_id()
    assert c["a10g.mma_sync_tflops"].verdict == "plausible"
    assert c["a10g.register_file"].verdict == "plausible"


def test_measured_slot():
    m = Measurement(1702, "GB/s", "bench ceiling.dram_copy_bandwidth", gpu="NVIDIA H100 PCIe")
    c = by_id(measured={"a10g.memory_spec": m})["a10g.memory_spec"]
    assert c.measurement is not None and c.measurement.name == "ceiling.dram_copy_bandwidth"
    assert c.measured is m and "measured 1.702 TB/s on NVIDIA H100 PCIe" in c.measured_note
    assert c.to_json()["measured"]["value"] == 1702
    with pytest.raises(LookupError, match="no claim .nope."):
        claims(measured={"nope": m})
