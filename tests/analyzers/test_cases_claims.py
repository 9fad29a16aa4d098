"""Claims of the second seed: verdicts computed by generic checks from the registry, the models and
cited evidence; every claim's figure changed to a true value changes its verdict."""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import re
import shutil
import subprocess

import pytest

from analyzers import gpus
from analyzers.cases import CLAIM_VERDICTS, Measurement, claims
from analyzers.cases.claim_checks import evidence, whitepaper_calc_occupancy
from analyzers.cases.claims import CLAIMS, HELPER_DEFAULTS, evaluate_claim
from tests.conftest import H200_KERNELS

checks_mod = importlib.import_module("analyzers.cases.claim_checks")


def by_id(**kw):
    return {c.id: c for c in claims(**kw)}


def test_every_claim_has_a_verdict_and_its_evidence():
    cs = claims()
    assert len(cs) >= 20 and len({c.id for c in cs}) == len(cs)
    for c in cs:
        assert c.verdict in CLAIM_VERDICTS and c.text and c.gpu and c.explanation.strip()
        d = c.to_json()
        assert {"id", "text", "gpu", "verdict", "explanation", "evidence"} <= set(d) and d[
            "evidence"
        ]
        assert c.verdict == min((e["verdict"] for e in d["evidence"]), key=CLAIM_VERDICTS.index)
    json.dumps([c.to_json() for c in cs], allow_nan=False)


EXPECTED = {
    "triton.a100_matmul_rate": "unit-error",
    "a10g.memory_spec": "self-contradictory",
    "a10g.bandwidth_fractions": "self-contradictory",
    "a10g.coalescing_utilisation": "self-contradictory",
    "headline.bandwidth": "self-contradictory",
    "a10g.mma_sync_tflops": "above-peak",
    "mma.operand_counts": "refuted",
    "mma.called_wmma": "refuted",
    "occupancy.helper_defaults": "self-contradictory",
    "bank.tile_width_rule": "refuted",
    "ncu.bytes_per_request": "unit-error",
    "tex.prefetch_kernel": "refuted",
    "host.builtin_prefetch": "refuted",
    "torch.dispatch_add_method": "refuted",
    "graph.solidification_dispatch": "refuted",
    "ncu.metric_names": "refuted",
    "a10g.register_file": "refuted",
    "a10g.hopper_mma": "refuted",
    "autotune.evaluations": "unverifiable",
    "license.llama3": "refuted",
    "provenance.llama_cpp": "refuted",
    "support.vllm": "refuted",
    "provenance.dolma": "refuted",
}


def test_verdicts_of_every_claim_the_issue_lists():
    c = by_id()
    assert {k: c[k].verdict for k in EXPECTED} == EXPECTED
    assert "100% of that peak" in c["triton.a100_matmul_rate"].explanation
    assert "780 GB/s" in c["a10g.memory_spec"].explanation
    # the 95.3 % GEMM: its own traffic is 21x the bytes it must move, which is poor tiling, not an
    # optimisation
    assert "21× the 384 MiB it must move" in c["a10g.bandwidth_fractions"].explanation
    assert (
        "51 % (§4.4 before the rewrite), 88.1 % (§2.5 default)"
        in c["a10g.coalescing_utilisation"].explanation
    )
    assert "92 % (title), 95.3 % (§2.5)" in c["headline.bandwidth"].explanation
    assert "4.1×" in c["a10g.mma_sync_tflops"].explanation
    assert (
        "operand A has 2 register(s), m16n8k16 .f16 needs 4" in c["mma.operand_counts"].explanation
    )
    assert "prefetcht0 on x86, not prefetchnta" in c["host.builtin_prefetch"].explanation
    assert (
        "torch._C._dispatch_add_method does not exist" in c["torch.dispatch_add_method"].explanation
    )
    # code that cannot run
    assert "no attribute `graph`" in c["graph.solidification_dispatch"].explanation
    assert "did it mean dram__bytes.sum" in c["ncu.metric_names"].explanation
    assert "tex is used but never declared" in c["tex.prefetch_kernel"].explanation
    assert "Meta Llama 3 Community License" in c["license.llama3"].explanation


# every claim, its figure changed to the true one (or to one the checks accept): the verdict must
# change
TRUE = {
    "triton.a100_matmul_rate": {"rate_vs_peak": {"rate": 250, "unit": "TFLOPS"}},
    "a10g.memory_spec": {
        "spec_bandwidth": {"statements": [("§2.5", 600.0), ("§4.1", 384 * 12.5 / 8)]},
        "arithmetic": {"sums": [("384-bit × 12.5 Gbps / 8", 384 * 12.5 / 8, 600, 0.001)]},
    },
    "a10g.bandwidth_fractions": {
        "fraction_vs_anchor": {"pct": 6.7},
        "gemm_traffic": {"bandwidth": 40.0},
        "arithmetic": {"sums": [("40 / 600 [%]", 40 / 6, 6.7, 0.01)]},
    },
    "a10g.coalescing_utilisation": {
        "same_quantity": {"statements": [("§4.4", 88.1), ("§2.5", 88.1)]}
    },
    "headline.bandwidth": {"same_quantity": {"statements": [("title", 95.3), ("§2.5", 95.3)]}},
    "a10g.mma_sync_tflops": {
        "rate_vs_peak": {"rate": 60},
        "arithmetic": {"sums": [("x", 1.0, 1.0, 0.01)]},
    },
    "mma.operand_counts": {
        "ptx_operands": {
            "asm": "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, "
            "{%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
        }
    },
    "mma.called_wmma": {"instruction_family": {"called": "mma"}},
    "occupancy.helper_defaults": {
        "occupancy_helper": {
            "table": ({"config": "B", "regs": 64, "smem": 16 * 1024, "claimed_blocks": 3},)
        }
    },
    "bank.tile_width_rule": {"bank_rule": {"width": 33}},
    "ncu.bytes_per_request": {"request_units": {"before": 1.0, "after": 4.0, "unit": "sectors"}},
    "tex.prefetch_kernel": {"kernel_code": {"declared": ["tex", "dst", "idx"], "write_bytes": 16}},
    "host.builtin_prefetch": {
        "host_builtin": {"level": None, "instruction": "prefetcht0", "target": "cpu"}
    },
    "torch.dispatch_add_method": {"api_exists": {"torch_c": ["_dispatch_library"]}},
    "graph.solidification_dispatch": {"api_exists": {"tensor_attrs": ["grad_fn"]}},
    "ncu.metric_names": {"metric_exists": {"metrics": ["dram__bytes.sum"]}},
    "a10g.register_file": {"registry_fact": {"stated": 80}},
    "a10g.hopper_mma": {"registry_fact": {"stated": 8}},
    "autotune.evaluations": {"figure_support": {"space_complete": True}},
    "license.llama3": {"citation": {"claimed": "Meta Llama 3 Community License"}},
    "provenance.llama_cpp": {"citation": {"claimed": "the ggml authors"}},
    "support.vllm": {"citation": {"claimed": "supported natively"}},
    "provenance.dolma": {"citation": {"claimed": "The Stack"}},
}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_true_figure_changes_the_verdict(claim):
    assert claim.id in TRUE, "every claim needs a mutation test"
    before = evaluate_claim(claim).verdict
    facts = {name: {**f, **TRUE[claim.id].get(name, {})} for name, f in claim.facts.items()}
    after = evaluate_claim(dataclasses.replace(claim, facts=facts)).verdict
    assert after != before, (claim.id, before)


def test_the_whitepaper_helper_against_the_real_calculator():
    # as written: a kernel without shared memory divides by zero; 16 KB blocks give at most 49152 //
    # 16384 = 3
    with pytest.raises(ZeroDivisionError):
        whitepaper_calc_occupancy(32, 0, 32)
    assert whitepaper_calc_occupancy(64, 16384, 32) == 3
    rows = by_id()["occupancy.helper_defaults"].details
    b32 = next(r for r in rows if r["config"] == "B" and r["threads_per_block"] == 32)
    # A10G, 64 regs, 16 KiB + 1 KiB reserved: 102400 / 17408 = 5 blocks (the table claims 16, the
    # helper 3)
    assert (b32["claimed_blocks"], b32["helper_blocks"], b32["real_blocks"]) == (16, 3, 5)
    a32 = next(r for r in rows if r["config"] == "A" and r["threads_per_block"] == 32)
    # CC 8.6 block limit
    assert a32["helper_blocks"] == "ZeroDivisionError" and a32["real_blocks"] == 16
    assert (
        "max_threads_per_sm=1024 (A10G: 1536)" in by_id()["occupancy.helper_defaults"].explanation
    )
    assert HELPER_DEFAULTS["total_shmem_per_sm"] == 49152


def test_verdicts_follow_the_registry(monkeypatch):
    """Not hard-coded: with a (hypothetical) A10G of 300 TFLOP/s and 60 SMs the verdicts change."""
    real = gpus.get_gpu("A10G")
    fake = dataclasses.replace(real, bf16_dense_flop_per_s=300e12, sm_count=60)
    monkeypatch.setattr(
        checks_mod, "get_gpu", lambda name: fake if "A10G" in name else gpus.get_gpu(name)
    )
    c = by_id()
    assert c["a10g.mma_sync_tflops"].verdict == "implausible"  # 289 of 300: above what GEMMs reach
    assert c["a10g.register_file"].verdict == "plausible"


def test_measured_slot():
    m = Measurement(1702, "GB/s", "bench ceiling.dram_copy_bandwidth", gpu="NVIDIA H100 PCIe")
    c = by_id(measured={"a10g.memory_spec": m})["a10g.memory_spec"]
    assert c.measurement is not None and c.measurement.name == "ceiling.dram_copy_bandwidth"
    assert c.measured is m and "measured 1.702 TB/s on NVIDIA H100 PCIe" in c.measured_note
    assert c.to_json()["measured"]["value"] == 1702
    with pytest.raises(LookupError, match="no claim .nope."):
        claims(measured={"nope": m})


# ---- the evidence is what it says it is
# ---------------------------------------------------------------------------


def test_ncu_names_come_from_the_bundled_report():
    import csv

    with gzip.open(H200_KERNELS / "full_raw_base.csv.gz", "rt") as f:
        header = next(csv.reader(f))
    bases = {h.split(".")[0] for h in header}
    ev = evidence()["ncu"]
    assert set(ev["counters"]) <= bases and {
        "dram__bytes",
        "lts__t_sectors_srcunit_tex_op_read",
    } <= set(ev["counters"])
    assert (
        set(ev["units"]) == {c.split("__")[0] for c in ev["counters"]} and "drum" not in ev["units"]
    )


@pytest.mark.skipif(
    shutil.which("gcc") is None
    or not re.match(r"x86_64|amd64", __import__("platform").machine(), re.I),
    reason="needs gcc on x86-64",
)
def test_gcc_compiles_the_prefetch_as_the_evidence_says(tmp_path):
    src = tmp_path / "p.c"
    src.write_text(
        "void p(const void *a) { __builtin_prefetch(a, 0, 3); }\n"
        "void q(const void *a) { __builtin_prefetch(a, 0, 0); }\n"
    )
    asm = subprocess.run(
        ["gcc", "-O2", "-S", "-o", "-", str(src)], capture_output=True, text=True
    ).stdout
    x86 = evidence()["gcc_prefetch"]["x86"]
    assert x86["3"] in asm and x86["0"] in asm


@pytest.mark.skipif(
    shutil.which("ptxas") is None and shutil.which("nvcc") is None, reason="needs the CUDA toolkit"
)
def test_ptxas_rejects_the_seeds_mma_and_accepts_a_correct_one(tmp_path):
    """The PTX ISA's fragment sizes (the evidence) agree with the assembler: the seed's instruction
    does not assemble, the same shape with four types and 2/4/2/2 registers does."""
    ptxas = shutil.which("ptxas") or shutil.which("nvcc").rsplit("/", 1)[0] + "/ptxas"

    def assemble(ins: str) -> int:
        ptx = (
            ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() {\n"
            " .reg .b32 %r<12>;\n " + ins.replace("%", "%r") + "\n ret;\n}\n"
        )
        (tmp_path / "k.ptx").write_text(ptx)
        return subprocess.run(
            [ptxas, "-arch=sm_80", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.o")],
            capture_output=True,
            text=True,
        ).returncode

    seed = next(c for c in CLAIMS if c.id == "mma.operand_counts").facts["ptx_operands"]["asm"]
    good = TRUE["mma.operand_counts"]["ptx_operands"]["asm"]
    assert assemble(seed) != 0 and assemble(good) == 0


def test_torch_names_where_torch_is_installed():
    torch = pytest.importorskip("torch")
    ev = evidence()
    assert not hasattr(torch._C, "_dispatch_add_method")
    assert all(hasattr(torch._C, n) for n in ev["torch_c_dispatch"]["names"][:10])
    assert not hasattr(torch.randn(2, 2), "graph")
