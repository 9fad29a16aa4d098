"""The chapter's models on the user's own kernels: every profiled launch of an Nsight Compute run
given its class and work (analyzers.kernel_classes), a predicted time on this GPU and a verdict that
can fail.

The model (the chapter's: time is traffic ÷ bandwidth or work ÷ compute, whichever is larger, plus
the fixed cost of a launch — Experiment 5-2's "5 µs more fixed overhead and 1792 GB/s"):

    t_pred = n · t0 + max(bytes / B_dram, FLOP / P_pipe)

More: docs/architecture.md, *analyzers.kernel_models*.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import polars as pl

from analyzers.ceilings import Ceiling
from analyzers.gpus import GPUSpec
from analyzers.kernel_classes import CLASSES, Work, work_of
from analyzers.units import fmt_bytes

TIME_TOL = 0.30
TRAFFIC_TOL = (0.85, 1.25)
#: below this minimum traffic the DRAM bytes are sectors, cache lines and the launch's own state,
#: not the tensors: the traffic is shown, not judged
TRAFFIC_MIN_BYTES = 1 << 20
FLOOR_CAP_NS = 3000.0
#: a fused chain is judged against a measured fused kernel within this tolerance (the eager →
#: compiled check)
FUSED_TOL = 0.35
#: the most launches from one op of an elementwise chain to the next (a GEMM may produce the other
#: operand between)
CHAIN_GAP = 2
#: tensor-pipe roof per tensor type, relative to BF16 dense (spec ratios of Hopper's datasheet)
TENSOR_SCALE = {"bf16": 1.0, "fp16": 1.0, "tf32": 0.5, "fp8": 2.0, "fp64": 67 / 989}


@dataclass
class Roofs:
    dram: float | None
    dram_src: str
    tensor: float | None
    tensor_src: str
    fp32: float | None
    fp32_src: str
    floor_ns: float
    floor_src: str


@dataclass
class LaunchModel:
    id: int
    cls: str
    label: str
    case: str | None
    # the launch that carries its op's model (itself when alone)
    primary: int
    launches: list[int]  # the op's launches
    op: str | None
    # parameters from the trace's shapes (else from the counters)
    shapes: bool
    params: dict = field(default_factory=dict)
    how: dict = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    min_bytes: float | None = None
    moved_bytes: float | None = None
    traffic_ratio: float | None = None
    traffic_verdict: str | None = None
    flop: float | None = None
    counted_flop: float | None = None
    t0_ns: float | None = None
    t_mem_ns: float | None = None
    t_compute_ns: float | None = None
    predicted_ns: float | None = None
    measured_ns: float | None = None  # the op's launches together (its model's measurement)
    duration_ns: float | None = None  # this launch alone
    time_ratio: float | None = None
    verdict: str | None = None
    win_ns: float | None = None
    note: str = ""


@dataclass
class Chain:
    ops: list[str]
    launches: list[int]
    numel: int
    unfused_bytes: float
    fused_bytes: float
    measured_ns: float
    fused_predicted_ns: float
    saving_ns: float


@dataclass
class ModelResult:
    roofs: Roofs
    launches: list[LaunchModel]
    chains: list[Chain]
    total_ns: float
    covered_ns: float
    shapes_ns: float
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float | None:
        return self.covered_ns / self.total_ns if self.total_ns else None

    def by_id(self) -> dict[int, LaunchModel]:
        return {m.id: m for m in self.launches}

    def as_dict(self) -> dict:
        return {
            "roofs": asdict(self.roofs),
            "total_ns": self.total_ns,
            "covered_ns": self.covered_ns,
            "coverage": self.coverage,
            "shapes_ns": self.shapes_ns,
            "notes": self.notes,
            "chains": [asdict(c) for c in self.chains],
            "chain_saving_per_step_ns": sum(c.saving_ns for c in self.chains),
            "launches": [asdict(m) for m in self.launches],
        }


def roofs(gpu: GPUSpec, measured: dict[str, Ceiling], durations: list[float]) -> Roofs:
    """The model's ceilings on this GPU: measured where the store has them, else the spec sheet."""

    def pick(res: str, spec: float | None, what: str) -> tuple[float | None, str]:
        if measured.get(res):
            return measured[res].value, f"measured: {measured[res].source}"
        return spec, (f"spec sheet ({gpu.name})" if spec else f"no {what} figure for {gpu.name}")

    dram, dsrc = pick("dram", gpu.dram_bandwidth_bytes_per_s, "DRAM bandwidth")
    tensor, tsrc = pick("bf16", gpu.bf16_dense_flop_per_s, "BF16 tensor")
    fp32, fsrc = pick("fp32", gpu.fp32_flop_per_s, "FP32")
    ds = [d for d in durations if d and d > 0]
    shortest = min(ds) if ds else FLOOR_CAP_NS
    floor = min(shortest, FLOOR_CAP_NS)
    fsrc0 = (
        f"the shortest profiled launch of this run ({shortest / 1e3:.2f} µs)"
        if shortest <= FLOOR_CAP_NS
        else f"{FLOOR_CAP_NS / 1e3:.1f} µs (the cap: this run's shortest launch takes "
        f"{shortest / 1e3:.2f} µs)"
    )
    return Roofs(dram, dsrc, tensor, tsrc, fp32, fsrc, floor, fsrc0)


def _verdict(r: float | None) -> str | None:
    if r is None:
        return None
    if r < 1 / (1 + TIME_TOL):
        return "faster than the model"
    return "agrees" if r <= 1 + TIME_TOL else "slower than the model"


def traffic_verdict(q: float | None) -> str | None:
    if q is None:
        return None
    if q < TRAFFIC_TOL[0]:
        return "below the minimum"
    return "at the minimum" if q <= TRAFFIC_TOL[1] else f"moves {q:.1f}× the minimum"


def predict(work: Work, rows: list[dict], rf: Roofs) -> LaunchModel:
    """The model of one op (its launches `rows`, the first FLOP-counting else longest carrying it)."""

    # a counter the report lacks, or a non-finite one, counts as none
    def fin(v) -> float:
        return float(v) if v is not None and math.isfinite(float(v)) and float(v) >= 0 else 0.0

    def counted(r):
        return fin(r.get("flop_tensor")) + fin(r.get("flop_fp32"))

    primary = max(rows, key=lambda r: (counted(r) > 0, fin(r.get("duration_ns"))))
    moved = sum(fin(r.get("dram_read_bytes")) + fin(r.get("dram_write_bytes")) for r in rows)
    has_moved = any(r.get("dram_read_bytes") is not None for r in rows)
    measured = sum(fin(r.get("duration_ns")) for r in rows)
    cflop = sum(counted(r) for r in rows)
    tensor_type = primary.get("tensor_type") or "bf16"
    m = LaunchModel(
        int(primary["id"]),
        work.cls,
        CLASSES[work.cls][1],
        work.case,
        int(primary["id"]),
        sorted(int(r["id"]) for r in rows),
        None,
        work.min_bytes is not None,
        dict(work.params),
        dict(work.how),
        list(work.evidence),
        work.min_bytes,
        moved if has_moved else None,
        counted_flop=cflop or None,
        measured_ns=measured or None,
        duration_ns=primary.get("duration_ns"),
    )
    if work.cls == "communication":
        m.note = (
            "communication is not judged by a single-kernel model (see the multi-rank analysis)"
        )
        return m
    bytes_ = work.min_bytes if work.min_bytes is not None else (moved if has_moved else None)
    flop = work.flop if work.flop is not None else (cflop or None)
    m.flop = flop
    if bytes_ is None or not rf.dram or not measured:
        m.note = "no DRAM byte counters in this report (ncu --set basic lacks them): no prediction"
        return m
    peak = (
        rf.tensor * TENSOR_SCALE.get(tensor_type, 1.0) if work.pipe == "tensor" else rf.fp32
    ) or None
    m.t0_ns = rf.floor_ns * len(rows)
    m.t_mem_ns = bytes_ / rf.dram * 1e9
    m.t_compute_ns = (
        flop / peak * 1e9 if flop and peak and work.pipe in ("tensor", "fp32") else None
    )
    m.predicted_ns = m.t0_ns + max(m.t_mem_ns, m.t_compute_ns or 0.0)
    m.time_ratio = measured / m.predicted_ns
    m.verdict = _verdict(m.time_ratio)
    m.win_ns = max(0.0, measured - m.predicted_ns)
    if work.min_bytes and has_moved:
        m.traffic_ratio = moved / work.min_bytes
        m.traffic_verdict = (
            traffic_verdict(m.traffic_ratio)
            if work.min_bytes >= TRAFFIC_MIN_BYTES
            else f"not judged (under {fmt_bytes(TRAFFIC_MIN_BYTES)})"
        )
    if (
        work.cls == "matmul"
        and work.flop
        and cflop
        and work.pipe == "tensor"
        and cflop > 1.5 * work.flop
    ):
        m.evidence.append(
            f"the tensor pipe counted {cflop / work.flop:.1f}× the 2·M·N·K FLOP (tiles padded: M = "
            f"{work.params.get('M')} fills part of a tile)"
        )
    return m


def _secondary(m: LaunchModel, row: dict) -> LaunchModel:
    return LaunchModel(
        int(row["id"]),
        m.cls,
        m.label,
        m.case,
        m.primary,
        m.launches,
        m.op,
        m.shapes,
        duration_ns=row.get("duration_ns"),
        note=f"one of the {len(m.launches)} launches of {m.op or 'its op'}: judged "
        f"with launch {m.primary}, which carries the op's model",
    )


def model_launches(
    kernels: pl.DataFrame,
    gpu: GPUSpec,
    measured: dict[str, Ceiling],
    joined=None,
    shapes: pl.DataFrame | None = None,
) -> ModelResult:
    """Every launch of an analysed ncu run (analyzers.ncu_run.NcuAnalysis.kernels) with its model;
    `joined`: the run's analyzers.join.JoinResult with a trace of the same program, `shapes`: that
    trace's op shapes (collectors.kineto_shapes.op_shapes)."""
    rows = kernels.sort("id").to_dicts()
    rf = roofs(gpu, measured, [r.get("duration_ns") for r in rows])
    link = {}
    if joined is not None:
        link = {j.ncu_id: j for j in joined.matched if getattr(j, "external_id", None) is not None}
    shp = {}
    if shapes is not None and shapes.height:
        shp = {r["external_id"]: r for r in shapes.iter_rows(named=True)}
    groups: dict[object, list[dict]] = {}
    ops: dict[object, tuple] = {}
    for r in rows:
        j = link.get(r["id"])
        s = shp.get(j.external_id) if j is not None else None
        key = ("op", j.external_id) if s is not None else ("launch", r["id"])
        groups.setdefault(key, []).append(r)
        ops[key] = (
            (s["op"], s["input_dims"], s["input_types"])
            if s is not None
            else ((j.op_name, None, None) if j is not None and j.op_name else (None, None, None))
        )
    out: list[LaunchModel] = []
    works: dict[int, Work] = {}
    for key, rs in groups.items():
        op, dims, types = ops[key]
        lead = max(
            rs,
            key=lambda r: (
                (r.get("flop_tensor") or 0) + (r.get("flop_fp32") or 0) > 0,
                r.get("duration_ns") or 0,
            ),
        )
        w = work_of(lead, op if dims is not None else None, dims, types)
        if dims is None and op:
            w.evidence.append(f"launched by {op} (no recorded shapes)")
        m = predict(w, rs, rf)
        m.op = op
        works[m.id] = w
        out.append(m)
        out += [_secondary(m, r) for r in rs if int(r["id"]) != m.id]
    out.sort(key=lambda m: m.id)

    # a missing or non-finite duration adds nothing to either side
    def dur(v) -> float:
        return float(v) if v is not None and math.isfinite(float(v)) and float(v) > 0 else 0.0

    total = float(sum(dur(r.get("duration_ns")) for r in rows))
    by = {m.id: m for m in out}
    covered = sum(dur(m.duration_ns) for m in out if by[m.primary].predicted_ns is not None)
    with_shapes = sum(
        dur(m.duration_ns) for m in out if by[m.primary].predicted_ns is not None and m.shapes
    )
    notes = []
    if joined is None:
        notes.append(
            "no trace of this program joined: classes and traffic come from the counters alone (no "
            "shapes), so only the time is judged; join a PyTorch profiler trace recorded with "
            "record_shapes=True for the minimum traffic of every GEMM, norm and elementwise op"
        )
    elif not shp:
        notes.append(
            "the joined trace has no input shapes (record it with "
            "torch.profiler.profile(record_shapes=True)): classes and traffic come from the "
            "counters"
        )
    elif total and with_shapes < 0.5 * total:
        notes.append(
            f"only {with_shapes / total:.0%} of the kernel time matched a trace kernel whose op "
            "recorded shapes: kernels replayed from a CUDA graph run no op in the trace. Join a "
            "trace of the same program run without the graph (eager): its kernels and their order "
            "are the graph's, and it has their shapes"
        )
    chains = fusion_chains(joined, by, works, rf) if joined is not None else []
    return ModelResult(rf, out, chains, total, covered, with_shapes, notes)


def fusion_chains(
    joined, by: dict[int, LaunchModel], works: dict[int, Work], rf: Roofs
) -> list[Chain]:
    """Elementwise ops of the joined step where each consumes the previous one's result (an input of
    its shape) within CHAIN_GAP launches (a GEMM producing the other operand may run between:
    SiLU(X·Wg) ⊙ (X·Wu)): their fused prediction (`fusion.activation_chain`): traffic without the
    intermediates (each written once and read back once), one launch."""
    seq = sorted((j for j in joined.matched if j.ncu_id in by), key=lambda j: j.position)
    chains, cur = [], []

    def flush():
        if len(cur) >= 2 and rf.dram:
            ws = [works[by[j.ncu_id].primary] for j in cur]
            unfused = sum(w.min_bytes or 0 for w in ws)
            saved = sum(2 * w.out.nbytes for w in ws[:-1] if w.out is not None)
            fused = max(0.0, unfused - saved)
            meas = sum(by[j.ncu_id].duration_ns or 0 for j in cur)
            pred = rf.floor_ns + fused / rf.dram * 1e9
            chains.append(
                Chain(
                    [by[j.ncu_id].op or "?" for j in cur],
                    [j.ncu_id for j in cur],
                    ws[-1].out.numel if ws[-1].out is not None else 0,
                    unfused,
                    fused,
                    meas,
                    pred,
                    max(0.0, meas - pred),
                )
            )
        cur.clear()

    for j in seq:
        m = by[j.ncu_id]
        w = works.get(m.id) if m.primary == m.id else None
        if not (
            w is not None
            and m.cls == "elementwise"
            and w.out is not None
            and w.min_bytes is not None
            and len(m.launches) == 1
        ):
            if cur and j.position - cur[-1].position > CHAIN_GAP:
                flush()
            continue
        if cur:
            prev = works[by[cur[-1].ncu_id].id]
            if not (
                j.position - cur[-1].position <= CHAIN_GAP
                and prev.out is not None
                and any(o.dims == prev.out.dims for o in w.inputs)
            ):
                flush()
        cur.append(j)
    flush()
    return chains


def launch_frame(result: ModelResult) -> pl.DataFrame:
    """id -> the model's columns (nanoseconds; only the launch carrying an op's model has its times,
    so sums over launches count each op once)."""
    rows = [
        {
            "id": m.id,
            "model_class": m.label,
            "model_pred_ns": m.predicted_ns if m.primary == m.id else None,
            "model_meas_ns": m.measured_ns
            if m.primary == m.id and m.predicted_ns is not None
            else None,
            "model_win_ns": m.win_ns if m.primary == m.id else None,
            "model_verdict": m.verdict if m.primary == m.id else f"with launch {m.primary}",
            "model_case": m.case,
            "model_traffic": m.traffic_verdict if m.primary == m.id else None,
        }
        for m in result.launches
    ]
    return pl.DataFrame(
        rows,
        schema={
            "id": pl.Int64,
            "model_class": pl.String,
            "model_pred_ns": pl.Float64,
            "model_meas_ns": pl.Float64,
            "model_win_ns": pl.Float64,
            "model_verdict": pl.String,
            "model_case": pl.String,
            "model_traffic": pl.String,
        },
    )


def ops_table(result: ModelResult) -> pl.DataFrame:
    """One row per modelled op (its carrying launch), with what the pages and the CLI show of it."""
    rows = []
    for m in result.launches:
        if m.primary != m.id:
            continue
        rows.append(
            {
                "id": m.id,
                "launches": len(m.launches),
                "class": m.label,
                "case": m.case,
                "op": m.op,
                "params": param_text(m),
                "shapes": m.shapes,
                "measured_ns": m.measured_ns,
                "predicted_ns": m.predicted_ns,
                "ratio": m.time_ratio,
                "verdict": m.verdict,
                "win_ns": m.win_ns,
                "min_bytes": m.min_bytes,
                "moved_bytes": m.moved_bytes,
                "traffic_ratio": m.traffic_ratio,
                "traffic_verdict": m.traffic_verdict,
            }
        )
    schema = {
        "id": pl.Int64,
        "launches": pl.Int64,
        "class": pl.String,
        "case": pl.String,
        "op": pl.String,
        "params": pl.String,
        "shapes": pl.Boolean,
        "measured_ns": pl.Float64,
        "predicted_ns": pl.Float64,
        "ratio": pl.Float64,
        "verdict": pl.String,
        "win_ns": pl.Float64,
        "min_bytes": pl.Float64,
        "moved_bytes": pl.Float64,
        "traffic_ratio": pl.Float64,
        "traffic_verdict": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def param_text(m: LaunchModel) -> str:
    """The parameters as one short text: "M1 N6144 K2048, 2 B" (shapes), "2.01e+08 FLOP" (counters)."""
    p = m.params
    if m.cls == "matmul" and "M" in p:
        return (
            f"M{p['M']} N{p['N']} K{p['K']}"
            + (f" ×{p['batch']}" if p.get("batch") else "")
            + f", {p.get('elem', '?')} B"
        )
    if m.cls == "attention" and "Lq" in p:
        return f"B{p['B']} H{p['H']} Lq{p['Lq']} Lk{p['Lk']} d{p['d']}"
    if "rows" in p:
        return f"{p['rows']} rows × {p['width']}"
    if "elements" in p:
        return f"{p['elements']:,} el. × {p['passes']}, {p.get('elem', '?')} B"
    if "bytes" in p and p["bytes"] is not None:
        return fmt_bytes(p["bytes"])
    if "FLOP" in p:
        return f"{p['FLOP']:.3g} FLOP"
    if "bytes moved" in p:
        return f"{fmt_bytes(p['bytes moved'] or 0)} moved"
    return ""


def summary(result: ModelResult) -> dict:
    """Shares of the profiled kernel time by verdict, the time to win against the model, the work
    with the most of it (one entry per class, op and parameters: eight layers' identical attention
    is one cause), one sentence."""
    t = ops_table(result)
    total = result.total_ns or 0.0
    by_verdict = {
        v: float(t.filter(pl.col("verdict") == v)["measured_ns"].sum() or 0)
        for v in ("agrees", "slower than the model", "faster than the model")
    }
    win = float(t["win_ns"].sum() or 0) if t.height else 0.0
    chains = sum(c.saving_ns for c in result.chains)
    top = (
        t.filter(pl.col("win_ns") > 0)
        .group_by("class", "op", "params", maintain_order=True)
        .agg(
            pl.col("id").first(),
            pl.len().alias("ops"),
            pl.col("win_ns").sum(),
            pl.col("measured_ns").sum(),
            pl.col("predicted_ns").sum(),
        )
        .sort("win_ns", descending=True, maintain_order=True)
        .head(3)
    )
    s = {
        "total_ns": total,
        "coverage": result.coverage,
        "shapes_share": result.shapes_ns / total if total else None,
        "verdict_ns": by_verdict,
        "win_ns": win,
        "chain_saving_ns": chains,
        "chains": len(result.chains),
        "top": top.to_dicts(),
    }
    if not total or result.coverage is None:
        s["sentence"] = "No launch with a duration: nothing to compare with the textbook."
        return s
    if not result.covered_ns:
        s["sentence"] = (
            "No launch carries the chapter's prediction: the report lacks the DRAM byte counters "
            "the model needs (dram__bytes_read.sum, dram__bytes_write.sum: ncu --set full, or "
            "--section MemoryWorkloadAnalysis)."
        )
        return s
    parts = [
        f"{result.coverage:.0%} of the profiled kernel time carries the chapter's prediction"
        + (
            f" ({s['shapes_share']:.0%} with the shapes from the joined trace)"
            if result.shapes_ns
            else " (from the counters alone: no joined trace with shapes)"
        )
    ]
    parts.append(
        f"{by_verdict['agrees'] / total:.0%} of it runs at the model (within ±{TIME_TOL:.0%}), "
        f"{by_verdict['slower than the model'] / total:.0%} slower"
    )
    if win:
        lead = top.row(0, named=True) if top.height else None
        parts.append(
            f"kernels at the ceilings would save {win / 1e3:,.1f} µs ({win / total:.0%})"
            + (
                f", most in {lead['class']} ({lead['params']}, launch {lead['id']} and alike: "
                f"{lead['win_ns'] / 1e3:,.1f} µs over {lead['ops']} "
                f"op{'s' if lead['ops'] != 1 else ''})"
                if lead
                else ""
            )
        )
    if result.chains:
        parts.append(
            f"fusing {len(result.chains)} chain{'s' if len(result.chains) != 1 else ''} of "
            f"elementwise kernels would save about {chains / 1e3:,.1f} µs per step"
        )
    s["sentence"] = "; ".join(parts) + "."
    return s
