"""The chapter's models on real kernels, unit by unit (analyzers.kernel_classes,
analyzers.kernel_models): the work inferred from an aten op's shapes, the counters overruling the
op, each verdict flipped by a measurement, the fused-chain arithmetic and the coverage."""

from __future__ import annotations

import json
from types import SimpleNamespace

import polars as pl
import pytest

from analyzers.gpus import get_gpu
from analyzers.kernel_classes import work_of
from analyzers.kernel_models import TIME_TOL, model_launches, predict, roofs, traffic_verdict
from collectors.kineto_shapes import op_shapes

H100 = get_gpu("H100 SXM")


def row(i=0, dur=10_000.0, rd=0.0, wr=0.0, tensor=0.0, fp32=0.0, name="k"):
    return {
        "id": i,
        "kernel_name": name,
        "duration_ns": dur,
        "dram_read_bytes": rd,
        "dram_write_bytes": wr,
        "flop_tensor": tensor,
        "flop_fp32": fp32,
        "tensor_type": "bf16" if tensor else None,
    }


def dims(*d):
    return json.dumps(list(d))


def test_matmul_from_the_ops_shapes():
    w = work_of(
        row(tensor=1e9),
        "aten::mm",
        dims([1, 2048], [2048, 6144], [1, 6144]),
        dims("c10::BFloat16", "c10::BFloat16", "c10::BFloat16"),
    )
    assert w.cls == "matmul" and (
        w.params["M"],
        w.params["N"],
        w.params["K"],
        w.params["elem"],
    ) == (1, 6144, 2048, 2)
    assert w.min_bytes == 2 * (1 * 2048 + 2048 * 6144 + 1 * 6144)  # A + W + C, each once
    assert w.flop == 2 * 1 * 6144 * 2048
    # the chapter's example: C = A·W, M 1024, K 4096, N 12288 in BF16: 8 + 96 + 24 = 128 MiB
    w = work_of(
        row(tensor=1e9),
        "aten::mm",
        dims([1024, 4096], [4096, 12288]),
        dims("c10::BFloat16", "c10::BFloat16"),
    )
    assert w.min_bytes == 128 * 2**20
    lin = work_of(
        row(tensor=1e9),
        "aten::linear",
        dims([8, 512, 1024], [4096, 1024], [4096]),
        dims("c10::BFloat16", "c10::BFloat16", "c10::BFloat16"),
    )
    assert (lin.params["M"], lin.params["N"], lin.params["K"]) == (4096, 4096, 1024)
    add = work_of(
        row(tensor=1e9),
        "aten::addmm",
        dims([4096], [4096, 1024], [1024, 4096], [], []),
        dims("c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"),
    )
    assert (add.params["M"], add.params["N"], add.params["K"]) == (4096, 4096, 1024)


def test_the_counters_overrule_the_op():
    # a launch of aten::mm that counts no FLOP is a helper (copy, split-K reduction), judged on its
    # own traffic
    w = work_of(
        row(rd=1e6, wr=1e6),
        "aten::mm",
        dims([1, 2048], [2048, 6144]),
        dims("c10::BFloat16", "c10::BFloat16"),
    )
    assert w.cls != "matmul" and w.min_bytes is None
    # anything that counts tensor FLOP is a matrix multiply, whatever op launched it
    w = work_of(
        row(tensor=5e8, rd=1e6),
        "aten::add",
        dims([1, 2048], [1, 2048]),
        dims("c10::BFloat16", "c10::BFloat16"),
    )
    assert w.cls == "matmul" and w.min_bytes is None
    # a name supports a memory-bound class, never a matmul
    assert work_of(row(rd=1e6, name="triton_red_fused_add_mean_mul_pow_rsqrt_0")).cls == "norm"
    assert work_of(row(rd=1e6, name="gemm_like_name")).cls == "memory"


def test_memory_bound_ops():
    bf = "c10::BFloat16"
    w = work_of(row(rd=1), "aten::mul", dims([1, 1, 5632], [1, 1, 5632]), dims(bf, bf))
    assert w.cls == "elementwise" and w.min_bytes == 3 * 5632 * 2
    # in place: read + write
    w = work_of(row(rd=1), "aten::mul_", dims([1, 2048], []), dims(bf, "Scalar"))
    assert w.min_bytes == 2 * 2048 * 2
    w = work_of(row(rd=1), "aten::embedding", dims([32000, 2048], [1]), dims(bf, "long int"))
    # the indexed row, not the table
    assert w.cls == "copy" and w.min_bytes == 2 * 2048 * 2 + 8
    w = work_of(
        row(rd=1),
        "aten::native_layer_norm",
        dims([4096, 1024], [], [1024], [1024], []),
        dims(bf, "ScalarList", bf, bf, "Scalar"),
    )
    assert w.cls == "norm" and (w.params["rows"], w.params["width"]) == (4096, 1024)
    w = work_of(
        row(rd=1),
        "aten::nll_loss_forward",
        dims([4096, 8192], [4096], [], [], []),
        dims("float", "long int", "", "Scalar", "Scalar"),
    )
    # one value per row, not the whole input
    assert w.min_bytes == 4096 * 4 + 4096 * 8
    w = work_of(row(rd=1), "aten::fill_", dims([4096, 8192], []), dims("float", "Scalar"))
    # written once, nothing read
    assert w.min_bytes == 4096 * 8192 * 4


def test_fused_adam_element_size_from_the_bytes_is_said():
    lists = [[[1024, 1024], [1024]]] * 4
    w = work_of(
        row(rd=1025 * 1024 * 2 * 4, wr=1025 * 1024 * 2 * 3),
        "aten::_fused_adamw_",
        json.dumps(lists + [[], [[], []]]),
        json.dumps(["TensorList"] * 6),
    )
    assert w.cls == "optimizer" and w.params["passes"] == 7 and w.params["elem"] == 2
    assert w.min_bytes == 7 * 1025 * 1024 * 2 and "not independent" in w.how["elem"]


def _rf():
    return roofs(H100, {}, [2000.0])


@pytest.mark.parametrize(
    "scale, verdict",
    [
        (1.0, "agrees"),
        (1 + TIME_TOL + 0.05, "slower than the model"),
        (1 / (1 + TIME_TOL) - 0.05, "faster than the model"),
    ],
)
def test_time_verdict_flips_with_the_measurement(scale, verdict):
    w = work_of(
        row(tensor=1e9),
        "aten::mm",
        dims([1, 8192], [8192, 8192]),
        dims("c10::BFloat16", "c10::BFloat16"),
    )
    rf = _rf()
    pred = rf.floor_ns + w.min_bytes / rf.dram * 1e9
    m = predict(w, [row(dur=pred * scale, rd=w.min_bytes, tensor=1e9)], rf)
    assert m.predicted_ns == pytest.approx(pred) and m.verdict == verdict
    assert (m.win_ns > 0) == (verdict == "slower than the model")


def test_traffic_verdict_flips():
    assert traffic_verdict(1.0) == "at the minimum"
    assert traffic_verdict(3.1) == "moves 3.1× the minimum"
    assert traffic_verdict(0.5) == "below the minimum"


def test_compute_bound_gemm_uses_the_tensor_roof():
    w = work_of(
        row(tensor=2 * 4096**3),
        "aten::mm",
        dims([4096, 4096], [4096, 4096]),
        dims("c10::BFloat16", "c10::BFloat16"),
    )
    rf = _rf()
    m = predict(w, [row(dur=200_000, rd=w.min_bytes, tensor=2 * 4096**3)], rf)
    assert m.t_compute_ns == pytest.approx(2 * 4096**3 / H100.bf16_dense_flop_per_s * 1e9)
    assert m.t_compute_ns > m.t_mem_ns


def _joined(*entries):
    return SimpleNamespace(
        matched=[
            SimpleNamespace(ncu_id=i, external_id=e, op_name=op, position=p)
            for i, e, op, p in entries
        ]
    )


def _shapes(*ops):
    return pl.DataFrame(
        [{"external_id": e, "op": op, "input_dims": d, "input_types": t} for e, op, d, t in ops]
    )


def test_an_op_of_two_launches_is_judged_once_and_coverage_stays_physical():
    bf = "c10::BFloat16"
    k = pl.DataFrame(
        [row(0, 9000, 12e6, 1e5, tensor=2e8), row(1, 3000, 1e4, 1e4), row(2, 2500, 1e4, 1e4)]
    )
    j = _joined((0, 7, "aten::mm", 0), (1, 7, "aten::mm", 1))
    s = _shapes((7, "aten::mm", dims([1, 2048], [2048, 6144]), dims(bf, bf)))
    res = model_launches(k, H100, {}, j, s)
    by = res.by_id()
    assert by[0].primary == 0 and by[1].primary == 0 and by[0].launches == [0, 1]
    assert by[0].measured_ns == 12000 and by[1].predicted_ns is None
    assert res.covered_ns == res.total_ns == 14500 and res.coverage == 1.0
    assert res.shapes_ns == 12000


def test_a_silu_mul_chain_fuses_to_three_tensors():
    bf = "c10::BFloat16"
    # the chapter's G, U, Z: [1024, 12288] BF16, 24 MiB each
    n = 1024 * 12288
    k = pl.DataFrame([row(0, 20000, 2 * n * 2, 0), row(1, 25000, 3 * n * 2, 0)])
    j = _joined((0, 1, "aten::silu", 4), (1, 2, "aten::mul", 5))
    s = _shapes(
        (1, "aten::silu", dims([1024, 12288]), dims(bf)),
        (2, "aten::mul", dims([1024, 12288], [1024, 12288]), dims(bf, bf)),
    )
    res = model_launches(k, H100, {}, j, s)
    assert len(res.chains) == 1
    c = res.chains[0]
    # 120 MiB -> 72 MiB (Example 5-4)
    assert c.unfused_bytes == 5 * n * 2 and c.fused_bytes == 3 * n * 2
    assert c.unfused_bytes / 2**20 == 120 and c.fused_bytes / 2**20 == 72
    # a GEMM between them (producing U) keeps the chain; further apart, or reading another shape, it
    # is none
    assert (
        len(
            model_launches(
                k, H100, {}, _joined((0, 1, "aten::silu", 4), (1, 2, "aten::mul", 6)), s
            ).chains
        )
        == 1
    )
    assert (
        model_launches(
            k, H100, {}, _joined((0, 1, "aten::silu", 4), (1, 2, "aten::mul", 8)), s
        ).chains
        == []
    )
    s2 = _shapes(
        (1, "aten::silu", dims([1024, 12288]), dims(bf)),
        (2, "aten::mul", dims([1024, 4096], [1024, 4096]), dims(bf, bf)),
    )
    assert model_launches(k, H100, {}, j, s2).chains == []


def test_op_shapes_reader(tmp_path):
    ev = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "ts": 1,
            "dur": 2,
            "args": {
                "External id": 5,
                "Input Dims": [[1, 2], [2, 3]],
                "Input type": ["float", "float"],
            },
        },
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"External id": 5}},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::empty",
            "ts": 1,
            "dur": 1,
            "args": {"External id": 6},
        },
    ]
    t = op_shapes(json.dumps({"traceEvents": ev}).encode(), "t.json")
    assert t.to_dicts() == [
        {
            "external_id": 5,
            "op": "aten::mm",
            "input_dims": "[[1, 2], [2, 3]]",
            "input_types": '["float", "float"]',
        }
    ]
    assert op_shapes(b"not json", "x.json").height == 0
    # what the typed reader cannot take (an id written as text elsewhere) is read by the standard
    # library
    ev.append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "ts": 1,
            "dur": 1,
            "args": {"External id": "7", "Input Dims": [[4]], "Input type": ["float"]},
        }
    )
    t2 = op_shapes(json.dumps({"traceEvents": ev}).encode(), "t.json")
    assert t2["external_id"].to_list() == [5]


def test_non_finite_counters_give_no_verdict_not_a_wrong_one():
    nan = float("nan")
    k = pl.DataFrame([row(0, nan, nan, nan), row(1, 5000.0, 1e6, 1e6)])
    res = model_launches(k, H100, {}, None, None)
    by = res.by_id()
    assert by[0].predicted_ns is None and by[0].verdict is None
    assert by[1].verdict is not None and 0 <= res.coverage <= 1
