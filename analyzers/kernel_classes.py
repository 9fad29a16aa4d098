"""What a real kernel does, and the work it must do: its class, its parameters and the minimum
traffic and FLOP of that work, for the chapter's models (analyzers.kernel_models).

More: docs/architecture.md, *analyzers.kernel_classes*.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

#: class -> (chapter case, what it is)
CLASSES = {
    "matmul": ("tiling.traffic", "matrix multiply"),
    "attention": ("flash.attention_traffic", "attention"),
    "norm": ("rmsnorm.split", "normalisation (RMSNorm / LayerNorm)"),
    "elementwise": ("fusion.activation_chain", "elementwise / activation"),
    "reduction": ("rmsnorm.split", "reduction / softmax"),
    "copy": ("tiling.traffic", "copy / index / transpose"),
    "optimizer": ("fusion.activation_chain", "optimizer step"),
    "memory": ("tiling.traffic", "memory-bound operator"),
    "communication": (None, "communication"),
}

_MATMUL = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "linear",
    "_scaled_mm",
    "mv",
    "addmv",
    "dot",
    "_addmm_activation",
    "addbmm",
    "_int_mm",
}
_ATTN = re.compile(
    r"scaled_dot_product|_flash_attention|_efficient_attention|_cudnn_attention|flash_attn|fmha"
)
_NORM = {
    "native_layer_norm",
    "layer_norm",
    "native_layer_norm_backward",
    "rms_norm",
    "_fused_rms_norm",
    "_fused_rms_norm_backward",
    "native_group_norm",
    "native_group_norm_backward",
    "native_batch_norm",
    "batch_norm",
    "group_norm",
    "_batch_norm_impl_index",
    "cudnn_batch_norm",
}
_REDUCE = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "softmax",
    "_softmax",
    "log_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "nll_loss_forward",
    "nll_loss_backward",
    "nll_loss2d_forward",
    "norm",
    "linalg_vector_norm",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "cumsum",
    "topk",
    "sort",
    "prod",
    "all",
    "any",
    "logsumexp",
    "cross_entropy_loss",
    "nll_loss",
    "nll_loss_nd",
    "max_pool2d",
    "avg_pool2d",
}
_COPY = {
    "copy_",
    "_to_copy",
    "to",
    "clone",
    "contiguous",
    "cat",
    "stack",
    "index",
    "index_select",
    "embedding",
    "embedding_dense_backward",
    "index_put_",
    "_index_put_impl_",
    "index_copy_",
    "index_copy",
    "scatter",
    "scatter_",
    "scatter_add_",
    "gather",
    "fill_",
    "zero_",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "_unsafe_index",
    "flip",
    "roll",
    "repeat",
    "narrow_copy",
    "slice_scatter",
    "select_scatter",
    "masked_scatter_",
    "index_add_",
    "arange",
    "transpose_copy",
    "permute_copy",
    "embedding_backward",
    "_reshape_copy",
    "constant_pad_nd",
    "new_zeros",
    "empty_like",
}
_WRITE_ONLY = {
    "fill_",
    "zero_",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "arange",
    "new_zeros",
}
# output = the indexed rows
_ROWS = {"embedding", "index_select", "index", "_unsafe_index", "gather"}
_SCATTER = {
    "index_put_",
    "_index_put_impl_",
    "index_copy_",
    "index_copy",
    "scatter_",
    "scatter",
    "scatter_add_",
    "index_add_",
}  # read + write the source
_ATTN_NAME = re.compile(r"sdpa|fmha|flash|attention|attn", re.I)
_COMM = re.compile(
    r"nccl|c10d::|allreduce|all_reduce|allgather|all_gather|reduce_scatter|alltoall|broadcast", re.I
)
#: Inductor / Triton kernel names: the fused ops' names, supporting (never deciding) a memory-bound
#: class
_NAME_HINTS = (
    ("norm", re.compile(r"rsqrt|layer_norm|rms_norm|native_layer_norm|var_mean")),
    (
        "reduction",
        re.compile(r"softmax|amax|argmax|logsumexp|_sum_|_red_|reduce|nll_loss|cross_entropy"),
    ),
    ("copy", re.compile(r"copy|index|cat_|transpose|gather|scatter|embedding|fill")),
    (
        "elementwise",
        re.compile(r"silu|gelu|relu|sigmoid|tanh|mul|add|sub|div|exp|elementwise|_poi_"),
    ),
)
#: bytes of one element of a trace's "Input type"
ELEM_BYTES = {
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "float": 4,
    "double": 8,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "bool": 1,
    "unsigned char": 1,
    "signed char": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e8m0fnu": 1,
}


@dataclass
class Operand:
    dims: list[int]
    elem: int | None  # bytes; None: unknown (a tensor list, an unknown type)
    # the op's argument it belongs to (a tensor list's tensors share one)
    group: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    @property
    def nbytes(self) -> int:
        return self.numel * (self.elem or 0)


@dataclass
class Work:
    """The class of a launch (or of the aten op that launched it) and the work it must do."""

    cls: str
    case: str | None
    # M, N, K, elem; rows x width; B, H, Lq, Lk, d; bytes
    params: dict = field(default_factory=dict)
    how: dict = field(default_factory=dict)  # parameter -> how it was inferred
    # minimum traffic (from shapes); None: not known
    min_bytes: float | None = None
    # the FLOP the work needs (from shapes), or counted
    flop: float | None = None
    pipe: str = "dram"  # the compute roof the FLOP run on: tensor | fp32
    evidence: list[str] = field(default_factory=list)  # why this class
    # the result (elementwise chains: the next op's input)
    out: Operand | None = None
    inputs: list[Operand] = field(default_factory=list)  # the tensor operands (elementwise chains)


def aten_name(op: str | None) -> str:
    return (op or "").split("::")[-1]


def operands(dims_json: str | None, types_json: str | None) -> list[Operand]:
    """The op's tensor inputs (a tensor list flattened into its tensors; scalars and empty entries dropped)."""
    try:
        dims, types = json.loads(dims_json or "[]"), json.loads(types_json or "[]")
    except ValueError:
        return []
    out = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if t in ("Scalar", "", "ScalarList", "None") or not isinstance(d, list):
            continue
        if d and all(isinstance(x, list) for x in d):  # a tensor list
            out += [Operand([int(v) for v in x], None, i) for x in d if x]
        elif all(isinstance(x, int) for x in d):
            if not d and t not in ELEM_BYTES:
                continue
            out.append(Operand([int(v) for v in d], ELEM_BYTES.get(t), i))
    return out


def _fmt_dims(o: Operand) -> str:
    return "[" + ", ".join(str(x) for x in o.dims) + "]"


def _counted(row: dict) -> tuple[float, float]:
    return float(row.get("flop_tensor") or 0.0), float(row.get("flop_fp32") or 0.0)


def by_counters(row: dict) -> Work:
    """A launch with no shapes: its class from its counters (a name hint supports a memory-bound
    label); the traffic is what it moved (not a minimum), the FLOP what it counted."""
    tensor, fp32 = _counted(row)
    moved = (row.get("dram_read_bytes") or 0) + (row.get("dram_write_bytes") or 0)
    name = (row.get("kernel_name") or row.get("name") or "").lower()
    if _COMM.search(name):
        return Work("communication", None, evidence=["an NCCL / collective kernel"])
    # tensor FLOP (the counters) in a kernel named for attention
    if tensor > 0 and _ATTN_NAME.search(name):
        return Work(
            "attention",
            CLASSES["attention"][0],
            {"FLOP": tensor},
            {
                "FLOP": "tensor-pipe FLOP counted by ncu; L, d and heads need the joined "
                "trace's shapes, so the traffic is the launch's own"
            },
            None,
            tensor,
            "tensor",
            ["counts tensor-pipe FLOP", "its name names attention (supporting, not deciding)"],
        )
    if tensor > 0:
        return Work(
            "matmul",
            CLASSES["matmul"][0],
            {"FLOP": tensor},
            {
                "FLOP": "tensor-pipe FLOP counted by ncu (sm__ops_path_tensor_*); M, N, K "
                "cannot be told apart from FLOP and bytes alone (no joined trace), so the traffic "
                "is the launch's own"
            },
            None,
            tensor,
            "tensor",
            ["counts tensor-pipe FLOP"],
        )
    cls = next((c for c, rx in _NAME_HINTS if rx.search(name)), "memory")
    ev = ["counts no tensor FLOP"] + (
        [f"its name names a {CLASSES[cls][1]} (supporting, not deciding)"]
        if cls != "memory"
        else []
    )
    return Work(
        cls,
        CLASSES[cls][0],
        {"bytes moved": moved},
        {
            "bytes moved": "DRAM bytes read + written (ncu): no shapes, so what it moved, not "
            "what it must"
        },
        None,
        fp32 or None,
        "fp32" if fp32 > 0.5 * moved else "dram",
        ev,
    )


def _matmul(name: str, ops: list[Operand]) -> Work | None:
    if len(ops) < 2:
        return None
    if (
        name in ("mm", "_int_mm", "_scaled_mm", "matmul")
        and len(ops[0].dims) == 2
        and len(ops[1].dims) == 2
    ):
        a, b, bias, batch = ops[0], ops[1], None, 1
        M, K, N = a.dims[0], a.dims[1], b.dims[1]
    elif name in ("addmm", "_addmm_activation") and len(ops) >= 3:
        bias, a, b, batch = ops[0], ops[1], ops[2], 1
        M, K, N = a.dims[0], a.dims[1], b.dims[-1]
    elif name in ("bmm", "baddbmm", "addbmm") and len(ops) >= 2:
        bias = ops[0] if name != "bmm" else None
        a, b = (ops[1], ops[2]) if name != "bmm" else (ops[0], ops[1])
        if len(a.dims) != 3 or len(b.dims) != 3:
            return None
        batch, M, K, N = a.dims[0], a.dims[1], a.dims[2], b.dims[2]
    elif name == "linear":
        a, b = ops[0], ops[1]
        bias, batch = (ops[2] if len(ops) > 2 else None), 1
        M, K, N = math.prod(a.dims[:-1]) if len(a.dims) > 1 else 1, a.dims[-1], b.dims[0]
    elif name in ("mv", "addmv"):
        a, b = (ops[0], ops[1]) if name == "mv" else (ops[1], ops[2])
        bias, batch = (ops[0] if name == "addmv" else None), 1
        M, K, N = a.dims[0], a.dims[-1], 1
    else:
        return None
    ea, eb = a.elem or 2, b.elem or a.elem or 2
    ec = ea
    c = Operand([batch, M, N] if batch > 1 else [M, N], ec)
    traffic = batch * (ea * M * K + eb * K * N + ec * M * N) + (
        bias.nbytes if bias is not None else 0
    )
    params = {"M": M, "N": N, "K": K, "elem": ea}
    if batch > 1:
        params["batch"] = batch
    how = {
        "M, N, K": f"aten::{name} on {_fmt_dims(a)} × {_fmt_dims(b)} (the trace's input shapes)",
        "elem": f"{ea} B: the trace's input type",
    }
    return Work(
        "matmul",
        "tiling.traffic",
        params,
        how,
        traffic,
        2.0 * batch * M * N * K,
        "tensor",
        [f"launched by aten::{name}"],
        c,
    )


def _attention(name: str, ops: list[Operand]) -> Work | None:
    four = [o for o in ops if len(o.dims) == 4]
    if len(four) < 3:
        return None
    backward = "backward" in name
    # grad_out, q, k, v, out, ... (the order of the aten signatures)
    if backward:
        q, k, v = four[1], four[2], four[3] if len(four) > 3 else four[2]
    else:
        q, k, v = four[0], four[1], four[2]
    B, H, Lq, d = q.dims
    Lk, dv = k.dims[2], v.dims[3]
    e = q.elem or 2
    o = Operand([B, H, Lq, dv], e)
    fwd = 2.0 * B * H * Lq * Lk * (d + dv)
    if backward:
        traffic = sum(x.nbytes for x in ops) + q.nbytes + k.nbytes + v.nbytes
        flop = 2.5 * fwd
    else:
        traffic = (
            q.nbytes
            + k.nbytes
            + v.nbytes
            + o.nbytes
            + sum(
                x.nbytes
                for x in ops
                if x not in (q, k, v) and len(x.dims) == 4 and x.numel < q.numel
            )
        )
        flop = fwd
    params = {"B": B, "H": H, "Lq": Lq, "Lk": Lk, "d": d, "elem": e}
    how = {
        "B, H, Lq, Lk, d": f"aten::{name}: Q {_fmt_dims(q)}, K {_fmt_dims(k)}, V {_fmt_dims(v)} "
        "(the trace's input shapes)",
        "FLOP": "2·B·H·Lq·Lk·(d + d_v)" + (" × 2.5 (backward)" if backward else "") + ": dense "
        "(a causal mask, which the trace does not record, halves it)",
    }
    return Work(
        "attention",
        "flash.attention_traffic",
        params,
        how,
        traffic,
        flop,
        "tensor",
        [f"launched by aten::{name}"],
        o,
    )


def _memory(name: str, cls: str, ops: list[Operand]) -> Work | None:
    if not ops:
        return None
    ts = [o for o in ops if o.elem is not None]
    if not ts and cls != "optimizer":
        return None
    big = max(ts or ops, key=lambda o: o.numel)
    how: dict[str, str] = {}
    if name in _WRITE_ONLY:
        traffic, out = big.nbytes, big
        how["bytes"] = f"writes {_fmt_dims(big)} once (a fill reads nothing)"
    elif name in _ROWS:
        # the indices were not recorded (a list of optional tensors): rows unknown
        if len(ops) < 2:
            return None
        table = max(ts, key=lambda o: o.numel)
        idx = min((o for o in ops if o is not table), key=lambda o: o.numel)
        row = table.nbytes // max(1, table.dims[0]) if table.dims else table.nbytes
        rows = idx.numel
        out = Operand(list(idx.dims) + table.dims[1:], table.elem)
        traffic = 2 * rows * row + idx.numel * (idx.elem or 8)
        how["bytes"] = (
            f"reads the {rows:,} indexed rows of {_fmt_dims(table)} (not the whole table) and "
            "writes them once, plus the indices"
        )
    elif name.startswith("nll_loss") and len(ts) >= 2:
        inp = max(ts, key=lambda o: o.numel)
        target = min((o for o in ts if o is not inp), key=lambda o: -o.numel)
        rows = inp.numel // max(1, inp.dims[-1]) if inp.dims else 1
        out = None
        # one value per row gathered (forward) or scattered into a gradient zeroed by its own fill
        # (backward)
        traffic = rows * (inp.elem or 4) + target.nbytes
        how["bytes"] = (
            f"{'writes' if 'backward' in name else 'reads'} one value per row of {_fmt_dims(inp)} "
            f"(the target's: {rows:,} values, not the whole tensor) and reads the targets "
            f"{_fmt_dims(target)}"
        )
    elif name in _SCATTER and len(ts) >= 2:
        dest, src = ts[0], min(ts[1:], key=lambda o: -o.numel)
        out = dest
        traffic = 2 * src.nbytes + sum(o.nbytes for o in ts[1:] if o is not src)
        how["bytes"] = (
            f"reads the source {_fmt_dims(src)} and writes it into {_fmt_dims(dest)} (only those "
            f"rows)"
        )
    elif cls == "optimizer":
        groups = sorted({o.group for o in ops if o.elem is None})
        n = sum(o.numel for o in ops if groups and o.group == groups[0])
        big_lists = [g for g in groups if sum(o.numel for o in ops if o.group == g) == n]
        passes = 7 if name.startswith(("_fused_adam", "_fused_adamw")) else len(big_lists) + 1
        how["elements"] = (
            f"{n:,} elements per tensor list, {len(big_lists)} lists of that size (parameters, "
            "gradients, moments)"
        )
        how["passes"] = f"{passes}: " + (
            "Adam reads parameters, gradients and both moments and writes parameters and both "
            "moments"
            if passes == 7
            else "every list read, the first written"
        )
        return Work(
            cls,
            CLASSES[cls][0],
            {"elements": n, "passes": passes},
            how,
            None,
            None,
            "dram",
            [f"launched by aten::{name}"],
            None,
        )
    else:
        inplace = name.endswith("_") and name not in ("copy_",)
        reduce_small = cls == "reduction" and not name.startswith(
            ("_softmax", "softmax", "_log_softmax", "log_softmax", "cumsum", "sort")
        )
        if name == "copy_":
            out, reads = ts[0], ts[1:] or ts
            traffic = sum(o.nbytes for o in reads) + ts[0].nbytes
        elif reduce_small:
            out, traffic = None, sum(o.nbytes for o in ts)
        else:
            out = ts[0] if inplace else Operand(list(big.dims), max(o.elem for o in ts))
            traffic = sum(o.nbytes for o in ts) + out.nbytes
        how["bytes"] = (
            "reads "
            + " + ".join(_fmt_dims(o) for o in ts)
            + " once"
            + ("" if out is None else f", writes {_fmt_dims(out)} once")
            + (" (the result of a reduction is small: not counted)" if reduce_small else "")
        )
    params = {"bytes": traffic}
    if cls == "norm" and big.dims:
        params.update(rows=big.numel // max(1, big.dims[-1]), width=big.dims[-1])
        how["rows × width"] = f"{_fmt_dims(big)}: the normalised width is the last dimension"
    return Work(
        cls,
        CLASSES[cls][0],
        params,
        how,
        float(traffic),
        None,
        "dram",
        [f"launched by aten::{name}"],
        out,
        ts,
    )


def op_class(op: str | None) -> str | None:
    """The class an aten op's name says (None: not an op the classes know)."""
    n = aten_name(op)
    if not op:
        return None
    if _COMM.search(op):
        return "communication"
    if n in _MATMUL:
        return "matmul"
    if _ATTN.search(n):
        return "attention"
    if n in _NORM:
        return "norm"
    if n.startswith(("_fused_adam", "_fused_sgd", "_foreach_", "_fused_adagrad")):
        return "optimizer"
    if n in _REDUCE:
        return "reduction"
    if n in _COPY:
        return "copy"
    if op.startswith("aten::"):
        return "elementwise"
    return None


def work_of(
    row: dict, op: str | None = None, dims: str | None = None, types: str | None = None
) -> Work:
    """The launch's class and work (module docstring): from the aten op and its shapes where the
    trace gives them and the counters agree, else from the counters."""
    cls = op_class(op)
    tensor, fp32 = _counted(row)
    if cls is None or op is None or not op.startswith("aten::"):
        w = by_counters(row)
        if op:
            w.evidence.append(
                f"launched by {op} (an Inductor / Triton launcher: its buffers are listed, not its "
                "minimum traffic)"
                if not op.startswith("aten::")
                else f"launched by {op}"
            )
        return w
    name = aten_name(op)
    ops = operands(dims, types)
    if (
        cls in ("matmul", "attention")
        and tensor <= 0
        and fp32 <= 0
        and row.get("flop_tensor") is not None
    ):
        # a copy / reduction kernel of a GEMM or attention op
        w = by_counters(row)
        w.evidence.append(
            f"launched by {op}, but counts no FLOP: a helper kernel of that op (copy, split-K "
            "reduction, fill), judged on its own traffic"
        )
        return w
    if cls not in ("matmul", "attention") and tensor > 0:
        w = by_counters(row)
        w.evidence.append(f"launched by {op}, but counts tensor-pipe FLOP: the counters decide")
        return w
    if cls == "communication":
        return Work("communication", None, evidence=[f"launched by {op}"])
    w = (
        _matmul(name, ops)
        if cls == "matmul"
        else _attention(name, ops)
        if cls == "attention"
        else _memory(name, cls, ops)
    )
    if w is None:
        w = by_counters(row)
        w.evidence.append(f"launched by {op}, whose recorded shapes do not fit its class's model")
    if w.cls == "matmul" and tensor <= 0 and fp32 > 0:
        w.pipe = "fp32"
    if w.cls == "optimizer" and w.min_bytes is None and w.params.get("elements"):
        moved = (row.get("dram_read_bytes") or 0) + (row.get("dram_write_bytes") or 0)
        per = w.params["elements"] * w.params["passes"]
        e = min((1, 2, 4, 8), key=lambda x: abs(moved - x * per)) if moved else 4
        w.params["elem"], w.min_bytes = e, float(e * per)
        w.how["elem"] = (
            f"{e} B: the nearest element size to the DRAM bytes ÷ (elements × passes) — the trace "
            "gives no dtype for a tensor list, so this traffic is not independent of the "
            "measurement"
        )
    return w
