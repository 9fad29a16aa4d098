"""Terms of the predicted times: the GPU's achievable rates as case parameters, and the few formulas
every timed case combines (Little's law, waves and tail, block lifetimes).

Rates are parameters, not constants: each names the measured ceiling that replaces its default when
the caller passes the GPU's measured ceilings (`evaluate(..., ceilings=src.best_ceilings(gpu))`);
without one the default is the GPU's spec times a stated derating (each constant below says where it
comes from). A predicted time is an `estimate` with its `terms` (analyzers.cases.model.Term) and a
stated tolerance; the case's old lower bound stays beside it as a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analyzers.cases.model import Mechanism, Param, Prediction, Term, pred

# ---- stated deratings and defaults (bench-anchors.md sections in brackets)
# ----------------------------------------

#: streaming copy kernels reach 85–93 % of the datasheet DRAM bandwidth on A100/H100 [§3.1]
DRAM_DERATE = 0.90
#: public L2 read bandwidth is 2.1× (H200 10 TB/s), 2.6× (A100-80 5.3 TB/s) and 3.5× (H100-PCIe 7
#: TB/s) the DRAM spec [§3.2]; without a measured L2 ceiling the lowest ratio is taken
L2_PER_DRAM = 2.0
#: cuBLAS BF16 8192³ reaches 80 % of the dense tensor spec on H100/H200 [§3.4]
TENSOR_DERATE = 0.80
#: an FMA loop reaches 90 % of the FP32 spec (the suite's ks_fma: 60.5 of 67 TFLOP/s on the project
#: H200)
FP32_DERATE = 0.90
#: pinned host->device copies reach 82–88 % of the link's one-way rate [§3.3]
PINNED_DERATE = 0.86
#: pageable copies run at 0.2–0.5× pinned, bounded by the host's memcpy into the staging buffer
#: [§3.3]
HOST_MEMCPY_PER_LINK = 0.3
#: device-side cost of one kernel between two events: dependent back-to-back tiny kernels take ≈2.5
#: µs per kernel on an H200 (2.7 on an A100) [§3.5]
KERNEL_FLOOR_US = 2.5
#: host cost of one launch: raw cuLaunchKernel ≈3 µs (GB200), Triton's launcher 4.7, Inductor 6.8
#: [§3.5]
LAUNCH_US = 3.0
#: a PyTorch eager tiny op with a synchronisation each: 15–20 µs [§3.5]
SYNC_US = 15.0
#: one node of a replayed CUDA graph: ≈1.4 µs for dependent tiny kernels on H200/A100 [§3.5]
GRAPH_NODE_US = 1.4
#: DRAM latency under load: H200 ≈ 500–600 ns (chapter5-cases.md, littles_law)
LATENCY_NS = 550.0
#: DRAM latency unloaded: 484 cycles ≈ 244 ns on an H100 SXM (HBM3) [§3.2]
LATENCY_IDLE_NS = 250.0
#: L2 hit latency, far partition: ≈475 cycles ≈ 240 ns at 1.98 GHz [§3.2]
L2_LATENCY_NS = 240.0


def _spec(field: str, scale: float, derate: float):
    def f(g):
        v = getattr(g, field, None)
        return None if v is None else round(v * derate * scale, 6)

    return f


def p_dram(name: str = "bw") -> Param:
    return Param(
        name,
        "GB/s",
        4320,
        "achievable DRAM bandwidth (read + write)",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("dram_bandwidth_bytes_per_s", 1e-9, DRAM_DERATE),
        gpu_default_text=f"{DRAM_DERATE:.0%} of the DRAM spec (copy kernels reach 85–93 %)",
        ceiling="dram",
        ceiling_scale=1e-9,
    )


def p_l2(name: str = "l2bw") -> Param:
    return Param(
        name,
        "GB/s",
        9600,
        "achievable L2 read bandwidth",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("dram_bandwidth_bytes_per_s", 1e-9, L2_PER_DRAM),
        gpu_default_text=f"{L2_PER_DRAM:g}× the DRAM spec (public L2 figures: 2.1–3.5×)",
        ceiling="l2",
        ceiling_scale=1e-9,
    )


def p_tensor(name: str = "tensor") -> Param:
    return Param(
        name,
        "TFLOP/s",
        791,
        "achievable BF16 tensor-core rate",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("bf16_dense_flop_per_s", 1e-12, TENSOR_DERATE),
        gpu_default_text=f"{TENSOR_DERATE:.0%} of the dense BF16 spec, "
        "bf16_dense_flop_per_s (cuBLAS 8192³ reaches 80 %)",
        ceiling="bf16",
        ceiling_scale=1e-12,
    )


def p_fp32(name: str = "fp32") -> Param:
    return Param(
        name,
        "TFLOP/s",
        60.3,
        "achievable FP32 FMA rate (CUDA cores)",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("fp32_flop_per_s", 1e-12, FP32_DERATE),
        gpu_default_text=f"{FP32_DERATE:.0%} of the FP32 spec (an FMA loop reaches 90 %)",
        ceiling="fp32",
        ceiling_scale=1e-12,
    )


def p_kernel_floor(name: str = "t_kernel") -> Param:
    return Param(
        name,
        "µs",
        KERNEL_FLOOR_US,
        "device-side cost of one kernel between two events (an empty kernel's event time)",
        min=0,
        from_chapter=False,
        ceiling="kernel",
        ceiling_scale=1e6,
        default_source="≈ 2.5 µs per dependent tiny kernel on an H200 (bench-anchors §3.5)",
    )


def p_launch(name: str = "t_launch", default: float = LAUNCH_US) -> Param:
    return Param(
        name,
        "µs",
        default,
        "host cost of one launch (back-to-back empty kernels, fastest launcher)",
        min=0,
        from_chapter=False,
        ceiling="launch",
        ceiling_scale=1e6,
        default_source="raw cuLaunchKernel ≈ 3 µs (bench-anchors §3.5)",
    )


def p_sync(name: str = "t_sync") -> Param:
    return Param(
        name,
        "µs",
        SYNC_US,
        "one launch of a tiny kernel and a synchronisation, host clock",
        min=0,
        from_chapter=False,
        ceiling="sync",
        ceiling_scale=1e6,
        default_source="a PyTorch tiny op with a sync: 15–20 µs (bench-anchors §3.5)",
    )


def p_graph_node(name: str = "t_node") -> Param:
    return Param(
        name,
        "µs",
        GRAPH_NODE_US,
        "device time per node of a replayed CUDA graph of empty kernels",
        min=0,
        from_chapter=False,
        ceiling="graph",
        ceiling_scale=1e6,
        default_source="≈ 1.4 µs per graph node on H200/A100 (bench-anchors §3.5)",
    )


def p_latency(
    name: str = "latency",
    default: float = LATENCY_NS,
    what: str = "DRAM latency under load",
    source: str = "H200 ≈ 500–600 ns under load (chapter5-cases.md, littles_law)",
    ceiling: str | None = None,
) -> Param:
    """A latency in ns; with `ceiling` ("latency_dram", "latency_l2") the GPU's measured unloaded
    latency (`kernelscope bench`, case ceiling.load_latency) replaces the default."""
    return Param(
        name,
        "ns",
        default,
        what,
        positive=True,
        from_chapter=False,
        default_source=source,
        ceiling=ceiling,
        ceiling_scale=1e9,
    )


def p_h2d(name: str = "link_bw") -> Param:
    return Param(
        name,
        "GB/s",
        55.0,
        "achievable pinned host→device bandwidth",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("host_link_bytes_per_s", 1e-9, PINNED_DERATE),
        gpu_default_text=f"{PINNED_DERATE:.0%} of the host link (pinned copies reach 82–88 %)",
        ceiling="h2d",
        ceiling_scale=1e-9,
    )


def p_host_memcpy(name: str = "staging") -> Param:
    return Param(
        name,
        "GB/s",
        19.2,
        "host memcpy bandwidth from pageable memory into a pinned buffer (the staging pass of a "
        "pageable copy), measured on the same host",
        positive=True,
        from_chapter=False,
        gpu_default=_spec("host_link_bytes_per_s", 1e-9, HOST_MEMCPY_PER_LINK),
        gpu_default_text=f"{HOST_MEMCPY_PER_LINK:g}× the host link (pageable copies run "
        f"at 0.2–0.5× pinned)",
        ceiling="host_memcpy",
        ceiling_scale=1e-9,
    )


# ---- formulas
# ---------------------------------------------------------------------------------------------------


def little_rate(inflight_bytes: float, latency_s: float, ceiling: float) -> float:
    """Little's law: bytes in flight / latency, at most the ceiling (B/s)."""
    if latency_s <= 0:
        return ceiling
    return min(ceiling, inflight_bytes / latency_s)


def stream_time(nbytes: float, inflight_bytes: float, latency_s: float, bw: float) -> float:
    """Time to stream `nbytes` with at most `inflight_bytes` outstanding: one latency to the first
    byte, then the Little's-law rate for what does not fit in one round trip: L + min(b, N)/BW +
    max(0, b − N)/min(BW, N/L)."""
    if nbytes <= 0:
        return 0.0
    first = min(nbytes, inflight_bytes)
    return (
        latency_s
        + first / bw
        + max(0.0, nbytes - first) / little_rate(inflight_bytes, latency_s, bw)
    )


@dataclass(frozen=True)
class Waves:
    blocks: int
    per_wave: int  # SMs x resident blocks
    waves: int  # ceil(blocks / per_wave)
    # blocks / (waves x per_wave): the tail's share of idle SM slots is 1 - fill
    fill: float

    @property
    def text(self) -> str:
        return (
            f"{self.blocks} blocks on {self.per_wave} slots: {self.waves} "
            f"wave{'s' if self.waves != 1 else ''}, {self.fill:.0%} of the slots busy"
        )


def waves(blocks: int, sms: int, resident: int) -> Waves:
    """Waves and tail: the grid on SMs × resident blocks (from the occupancy calculator)."""
    per = max(1, sms * max(1, resident))
    w = max(1, math.ceil(blocks / per))
    return Waves(blocks, per, w, blocks / (w * per))


def lifetime_time(blocks: int, sms: int, resident: int, t_block: float) -> float:
    """Blocks that each live `t_block` (their dependent memory round trips), `resident` at a time
    per SM, spread over the SMs: ceil(ceil(blocks / SMs) / resident) × t_block — the latency-bound
    time of a grid (Little's law per SM: `resident` blocks in flight, each for t_block)."""
    per_sm = math.ceil(blocks / max(1, sms))
    return math.ceil(per_sm / max(1, resident)) * t_block


def time_estimate(
    key: str,
    label: str,
    terms: list[Term],
    total: float,
    formula: str,
    tol: float,
    *,
    mechanisms: tuple[Mechanism, ...] = (),
    **kw,
) -> Prediction:
    """A predicted time with its terms and tolerance (kind "estimate")."""
    return pred(
        key,
        label,
        total,
        "s",
        formula,
        kind="estimate",
        rel_tol=tol,
        terms=tuple(terms),
        mechanisms=mechanisms,
        **kw,
    )


def src(p, name: str) -> str:
    """Where a parameter's value came from (Params.sources), for a term's source text."""
    s = (getattr(p, "sources", None) or {}).get(name)
    return f"{name} = {p[name]:g} ({s})" if s else f"{name} = {p[name]:g}"
