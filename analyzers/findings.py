"""Plain-language findings for one profiled kernel, ranked by the time they are estimated to cost.

Pure functions: an analyzed kernel row (`analyzers.kernels.analyze_kernels`), the GPU spec and,
where a microbenchmark run measured them, the GPU's measured ceilings in; a list of `Finding` out.

More: docs/architecture.md, *analyzers.findings*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzers.gpus import GPUSpec
from analyzers.kernels import TENSOR_RATE
from analyzers.units import fmt_ns, number_of

SMEM_WAVEFRONTS_PER_SM_CYCLE = 1.0
#: below this duration a kernel is "short": a launch call (5-20 µs on the host: the chapter's 5 µs,
#: our H100 traces' median launch calls) costs about as much as the kernel, and its own counters
#: explain little of the time
SHORT_KERNEL_NS = 5_000.0


def share_text(x: float) -> str:
    """A share as a finding says it: whole percent from 10 %, one decimal below, "< 0.1 %" for less
    (never a bare "0 %")."""
    if x >= 0.1:
        return f"{x:.0%}"
    if x >= 0.001:
        return f"{x:.1%}"
    return "< 0.1 %"


#: a launch is at its bound when the busiest resource's time is at least this share of its duration
AT_BOUND = 0.7
SMEM_MODEL = (
    "shared memory serves one 128-byte wavefront (32 banks x 4 B) per SM per cycle: "
    "t_smem = wavefronts / (SMs x SM clock)"
)


@dataclass(frozen=True)
class Peak:
    value: float  # base units per second (B/s, FLOP/s)
    source: str  # "spec: ..." or "measured: ..."
    measured: bool = False


@dataclass(frozen=True)
class Finding:
    # "bank_conflicts", "uncoalesced", "latency", "small_grid", "at_bound"
    key: str
    title: str
    text: str  # plain language: what, why, what to try
    lost_ns: float  # estimated time lost (>= 0)
    share: float  # lost / duration
    metrics: dict[str, str] = field(default_factory=dict)  # cited metric -> value as shown
    model: str = ""  # the model the estimate comes from


def peaks_for(
    gpu: GPUSpec, measured: dict[str, tuple[float, str]] | None = None
) -> dict[str, Peak]:
    """DRAM, FP32 and tensor (dense BF16) peaks for the bound model: a measured ceiling ("dram" in
    B/s, "fp32" and "bf16" in FLOP/s, each with its source) when given, else the spec sheet's
    figure. Missing peaks are left out."""
    out: dict[str, Peak] = {}
    measured = measured or {}
    for key, mkey, field_name in (
        ("dram", "dram", "dram_bandwidth_bytes_per_s"),
        ("fp32", "fp32", "fp32_flop_per_s"),
        ("tensor", "bf16", "bf16_dense_flop_per_s"),
    ):
        if mkey in measured and measured[mkey][0]:
            v, src = measured[mkey]
            out[key] = Peak(float(v), f"measured ceiling: {src}", True)
        elif getattr(gpu, field_name, None):
            out[key] = Peak(
                float(getattr(gpu, field_name)), f"spec sheet: {gpu.source_of(field_name)}"
            )
    return out


def bounds(row: dict, gpu: GPUSpec, peaks: dict[str, Peak]) -> dict[str, float]:
    """Throughput bounds of one launch in ns (see the module docstring); a bound whose inputs are
    missing is absent. Keys: dram, fp32, tensor, smem, smem_ideal."""
    out: dict[str, float] = {}
    dram_bytes = number_of(row, "dram_bytes")
    if dram_bytes is not None and "dram" in peaks:
        out["dram"] = dram_bytes / peaks["dram"].value * 1e9
    flop = number_of(row, "flop_fp32")
    if flop is not None and "fp32" in peaks:
        out["fp32"] = flop / peaks["fp32"].value * 1e9
    tensor = {t: number_of(row, f"tensor_flop_{t}") for t in TENSOR_RATE}
    if any(v is not None for v in tensor.values()) and "tensor" in peaks:
        out["tensor"] = (
            sum((v or 0.0) / TENSOR_RATE[t] for t, v in tensor.items())
            / peaks["tensor"].value
            * 1e9
        )
    w, c, clk = (
        number_of(row, "smem_wavefronts"),
        number_of(row, "smem_bank_conflicts"),
        number_of(row, "sm_clock_hz"),
    )
    if w is not None and clk and gpu.sm_count:
        rate = gpu.sm_count * SMEM_WAVEFRONTS_PER_SM_CYCLE * clk / 1e9  # wavefronts per ns
        out["smem"] = w / rate
        if c is not None:
            out["smem_ideal"] = max(w - c, 0.0) / rate
    return out


#: the columns of an analyzed launch that bounds, kernel_findings and bound_of read (a missing one
#: reads as None)
FINDING_INPUTS = (
    "duration_ns",
    "dram_bytes",
    "flop_fp32",
    *(f"tensor_flop_{t}" for t in TENSOR_RATE),
    "smem_wavefronts",
    "smem_bank_conflicts",
    "sm_clock_hz",
    "smem_conflict_degree",
    "smem_ld_conflict_degree",
    "smem_st_conflict_degree",
    "global_ld_coalescing_ratio",
    "global_ld_sectors_per_request",
    "global_ld_ideal_sectors_per_request",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "predicted_occupancy_pct",
    "occupancy_limiter",
    "grid_size",
    "predicted_blocks_per_sm",
)

RESOURCE_NAMES = {
    "dram": "DRAM bandwidth",
    "fp32": "FP32 throughput",
    "tensor": "tensor-core throughput",
    "smem": "shared-memory bandwidth",
}


def kernel_findings(
    row: dict,
    gpu: GPUSpec,
    measured: dict[str, tuple[float, str]] | None = None,
    peaks: dict[str, Peak] | None = None,
    b: dict[str, float] | None = None,
    detail: bool = True,
) -> list[Finding]:
    """Findings for one analyzed launch, largest estimated loss first (see the module docstring).
    `peaks`: peaks_for(gpu, measured), and `b`: bounds(row, gpu, peaks), when the caller has them
    already (one table of launches). `detail=False`: the same findings (keys, titles, losses)
    without their text, metrics and model (the ranking of top_findings)."""
    d = number_of(row, "duration_ns")
    if not d:
        return []
    peaks = peaks_for(gpu, measured) if peaks is None else peaks
    b = bounds(row, gpu, peaks) if b is None else b
    tb = {k: v for k, v in b.items() if k in RESOURCE_NAMES}
    out: list[Finding] = []

    def add(key, title, text, lost, metrics, model):
        """text, metrics and model: functions that make them (called only with detail)."""
        lost = max(0.0, min(float(lost), d))
        if detail:
            out.append(Finding(key, title, text(), lost, lost / d, metrics(), model()))
        else:
            out.append(Finding(key, title, "", lost, lost / d))

    limiter = max(tb, key=tb.get) if tb else None
    t_bound = tb[limiter] if limiter else None
    peak_txt = {k: p.source for k, p in peaks.items()}

    # bank conflicts
    deg, w, c = (
        number_of(row, "smem_conflict_degree"),
        number_of(row, "smem_wavefronts"),
        number_of(row, "smem_bank_conflicts"),
    )
    if deg is not None and deg >= 1.1 and c and "smem" in b:
        others = max([b.get("smem_ideal", 0.0)] + [v for k, v in tb.items() if k != "smem"])
        lost = min(d, b["smem"]) - others
        where = []
        for side in ("ld", "st"):
            dv = number_of(row, f"smem_{side}_conflict_degree")
            if dv is not None and dv >= 1.1:
                where.append(f"{'loads' if side == 'ld' else 'stores'} {dv:.1f}-way")
        if lost > 0.05 * d:
            text = lambda: (
                f"Shared-memory accesses are serialised {deg:.1f}-way on average "
                f"({', '.join(where)}): {c:,.0f} of {w:,.0f} wavefronts are conflicts. The "
                f"shared-memory pipe alone needs {fmt_ns(b['smem'])} of the {fmt_ns(d)} kernel; "
                f"conflict-free it would need {fmt_ns(b.get('smem_ideal', 0))}. Pad the shared "
                "array (e.g. a row stride of 33 words instead of 32) or swizzle the index."
            )
        else:
            text = lambda: (
                f"Shared-memory accesses are serialised {deg:.1f}-way "
                f"({', '.join(where) or 'loads and stores'}), but the shared-memory pipe needs "
                f"only {fmt_ns(b['smem'])} of the {fmt_ns(d)} kernel; "
                f"{RESOURCE_NAMES.get(limiter, 'another resource')} limits it, so removing the "
                "conflicts saves little."
            )
        add(
            "bank_conflicts",
            f"{deg:.1f}-way shared-memory bank conflicts",
            text,
            lost,
            lambda: {
                "l1tex__data_pipe_lsu_wavefronts_mem_shared (ld+st)": f"{w:,.0f} wavefronts",
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared (ld+st)": f"{c:,.0f} wavefronts",
                "conflict degree = wavefronts / (wavefronts − conflicts)": f"{deg:.2f} ways",
                "sm clock (gpc__cycles_elapsed.avg.per_second)": f"{number_of(row, 'sm_clock_hz') / 1e9:.3g} "
                f"GHz",
            },
            lambda: SMEM_MODEL + f"; SMs = {gpu.sm_count} ({gpu.source_of('sm_count')})",
        )

    # uncoalesced global loads
    r = number_of(row, "global_ld_coalescing_ratio")
    if r is not None and r >= 1.2:
        lost = b["dram"] * (1 - 1 / r) if limiter == "dram" and "dram" in b else 0.0
        spr, ideal = (
            number_of(row, "global_ld_sectors_per_request"),
            number_of(row, "global_ld_ideal_sectors_per_request"),
        )
        add(
            "uncoalesced",
            f"Global loads fetch {r:.1f}× the sectors they need",
            lambda: (
                f"Each warp-wide load touches {spr:.1f} sectors of 32 B where {ideal:.0f} would "
                f"hold the bytes it uses, so {1 - 1 / r:.0%} of the load sectors carry unused "
                "bytes. "
                + (
                    "DRAM limits this kernel, so the extra sectors cost time. "
                    if limiter == "dram"
                    else f"{RESOURCE_NAMES.get(limiter, 'Another resource')} limits this kernel, "
                    "so the cost is mostly extra L2 traffic. "
                )
                + "Make consecutive threads read consecutive addresses (or stage through shared "
                "memory)."
            ),
            lost,
            lambda: {
                "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_…": f"{spr:.2f} sectors/request",
                "ideal (from smsp__sass_average_data_bytes_per_sector_mem_global_op_ld)": f"{ideal:.0f} sectors/request",
            },
            lambda: (
                "extra sectors = 1 − 1/r of the load traffic; costs time only when DRAM is the "
                "limiter: t_dram × (1 − 1/r)"
                + (f"; DRAM peak {peak_txt['dram']}" if "dram" in peak_txt else "")
            ),
        )

    # below the roofline / at a bound
    occ_a, occ_t = (
        number_of(row, "achieved_occupancy_pct"),
        number_of(row, "theoretical_occupancy_pct"),
    )
    occ_ours, lim = number_of(row, "predicted_occupancy_pct"), row.get("occupancy_limiter")
    if t_bound is not None:
        util = t_bound / d
        res = RESOURCE_NAMES[limiter]

        def metrics() -> dict:
            m = {"duration (gpu__time_duration.sum)": fmt_ns(d)}
            for k, v in tb.items():
                m[f"t_{k} ({RESOURCE_NAMES[k]} bound)"] = fmt_ns(v)
            if occ_a is not None:
                m["achieved occupancy (sm__warps_active…pct_of_peak_sustained_active)"] = (
                    f"{occ_a:.1f} %"
                )
            if occ_t is not None:
                m["theoretical occupancy (ncu)"] = f"{occ_t:.1f} %"
            if occ_ours is not None:
                m["theoretical occupancy (ours), limiter"] = f"{occ_ours:.1f} %, {lim or '—'}"
            return m

        def model() -> str:
            return (
                "roofline bounds: t_dram = bytes / DRAM peak, t_fp32 = FLOP / FP32 peak, t_tensor "
                "= tensor FLOP / (BF16 dense peak × type rate: TF32 ½, FP8 2), t_smem as above; "
                "time lost = duration − max(bounds)"
                + "".join(
                    f"; {RESOURCE_NAMES[k]} peak: {p}"
                    for k, p in peak_txt.items()
                    if k in RESOURCE_NAMES
                )
            )

        if util >= AT_BOUND:
            p = peaks.get("tensor" if limiter == "tensor" else limiter)
            above = ""
            if util > 1.0005:
                above = (
                    " That is above the "
                    f"{'measured ceiling' if p and p.measured else 'spec sheet peak'} "
                    f"({util:.0%}): "
                    + (
                        "a measured ceiling is the best rate kernelscope bench's own kernel "
                        "sustained on this GPU, not a hardware limit, and this launch beats it."
                        if p and p.measured
                        else "the datasheet quotes its peak at NVIDIA's reference "
                        "clock and this launch's SMs ran at "
                        f"{(number_of(row, 'sm_clock_hz') or 0) / 1e9:.2f} GHz."
                    )
                )
            title = (
                f"{res}-bound at {util:.0%} of the ceiling"
                if util <= 1.0005
                else f"{res}-bound, above the "
                f"{'measured ceiling' if p and p.measured else 'spec peak'} ({util:.0%})"
            )
            add(
                "at_bound",
                title,
                lambda: (
                    f"The kernel runs at the {res} bound: the bound needs {fmt_ns(t_bound)} of its "
                    f"{fmt_ns(d)}.{above} To go faster it must need less of it: "
                    + {
                        "dram": "move fewer bytes (fuse with neighbours, keep data on chip, use "
                        "narrower types).",
                        "fp32": "do less arithmetic or use the tensor cores.",
                        "tensor": "do fewer matrix FLOP (skip masked or padded tiles) or use a "
                        "faster type (FP8).",
                        "smem": "issue fewer shared-memory wavefronts (wider accesses, fewer "
                        "conflicts, reuse in registers).",
                    }[limiter]
                ),
                d - t_bound,
                metrics,
                model,
            )
        else:
            occ_txt = ""
            if occ_a is not None and occ_t is not None:
                occ_txt = (
                    f" Achieved occupancy is {occ_a:.0f} % of the warp slots (theoretical "
                    f"{occ_t:.0f} %" + (f", limited by {lim}" if lim else "") + ")."
                )
                if occ_a < 0.8 * occ_t:
                    occ_txt += " Achieved is well below theoretical: blocks finish unevenly or the grid is small."
            add(
                "latency",
                f"Latency-bound: {res} is only {share_text(util)} busy",
                lambda: (
                    f"No throughput limit explains the time: the busiest resource ({res}) would "
                    f"need {fmt_ns(t_bound)} of the {fmt_ns(d)}. The kernel waits on latency: too "
                    "few bytes or instructions are in flight (Little's law: in flight = "
                    f"throughput × latency).{occ_txt} Raise occupancy (fewer registers or less "
                    "shared memory per block, more blocks) or independent work per thread."
                ),
                d - t_bound,
                metrics,
                model,
            )

    # grid smaller than one wave
    blocks, per_sm = number_of(row, "grid_size"), number_of(row, "predicted_blocks_per_sm")
    if blocks and per_sm and gpu.sm_count:
        wave = blocks / (per_sm * gpu.sm_count)
        if wave < 1:
            add(
                "small_grid",
                f"The grid fills {share_text(wave)} of one wave ({blocks:,.0f} blocks)",
                lambda: (
                    f"{blocks:,.0f} blocks for {gpu.sm_count} SMs × {per_sm:.0f} resident blocks "
                    f"each: {share_text(1 - wave)} of the block slots stay empty for the whole "
                    "kernel. Launch more, smaller blocks or split the work (e.g. split-K)."
                ),
                d * (1 - wave),
                lambda: {
                    "launch__grid_size": f"{blocks:,.0f} blocks",
                    "blocks per SM (our occupancy calculator)": f"{per_sm:.0f}",
                    "SMs": f"{gpu.sm_count}",
                },
                lambda: "wave = blocks / (blocks per SM × SMs); lost ≈ duration × (1 − wave)",
            )

    # a short kernel: its launch matters more than its counters (module docstring)
    if d < SHORT_KERNEL_NS and any(f.key in ("latency", "small_grid") for f in out):
        lat = next((f for f in out if f.key == "latency"), None)
        lost = (
            lat.lost_ns
            if lat
            else max(f.lost_ns for f in out if f.key in ("latency", "small_grid"))
        )
        out = [f for f in out if f.key not in ("latency", "small_grid")]
        busy = (
            f"; its busiest resource ({RESOURCE_NAMES[limiter]}) is {share_text(t_bound / d)} busy"
            if t_bound
            else ""
        )
        add(
            "short_kernel",
            f"Short kernel ({fmt_ns(d)}): the launch dominates",
            lambda: (
                f"The kernel runs {fmt_ns(d)}{busy}. At this length the time is mostly fixed cost "
                "(launch, ramp-up, the last wave), and the host's launch call (about 5-20 µs) "
                "costs as much or more: tuning its memory access or occupancy can win at most "
                "these microseconds. What helps: fuse it with its neighbours (torch.compile, a "
                "hand-fused kernel) or launch the whole step as a CUDA graph; see the Timeline of "
                "the same program for whether the GPU waits for the host."
            ),
            lost,
            lambda: {"duration (gpu__time_duration.sum)": fmt_ns(d)},
            lambda: (
                f"a kernel shorter than {SHORT_KERNEL_NS / 1e3:g} µs; time lost = duration − "
                "max(bounds), as for a latency-bound kernel"
            ),
        )

    # largest estimated loss first; on a tie (e.g. nothing lost) the finding that names the bound
    # comes first
    out.sort(
        key=lambda f: (f.lost_ns, f.key in ("at_bound", "latency", "short_kernel")), reverse=True
    )
    return out


TOP_FINDING_SCHEMA = {
    "id": "Int64",
    "top_finding_key": "String",
    "top_finding": "String",
    "lost_ns": "Float64",
    "lost_share": "Float64",
    "bound": "String",
}


def bound_of(
    row: dict,
    gpu: GPUSpec,
    measured: dict | None = None,
    peaks: dict[str, Peak] | None = None,
    b: dict[str, float] | None = None,
) -> str | None:
    """What limits one launch, from the throughput bounds: the busiest resource ("dram", "fp32",
    "tensor", "smem") when its time is >= AT_BOUND of the duration, else "latency"; None when no
    bound can be computed."""
    d = number_of(row, "duration_ns")
    peaks = peaks_for(gpu, measured) if peaks is None else peaks
    tb = {
        k: v
        for k, v in (bounds(row, gpu, peaks) if b is None else b).items()
        if k in RESOURCE_NAMES
    }
    if not d or not tb:
        return None
    limiter = max(tb, key=tb.get)
    return limiter if tb[limiter] / d >= AT_BOUND else "latency"


def top_findings(analyzed, gpu: GPUSpec, measured: dict | None = None):
    """The biggest finding of every launch of an analyzed kernel table (a polars frame): id,
    top_finding_key, top_finding (title), lost_ns (estimated time lost), lost_share (of the launch),
    and its bound (bound_of). Null where a launch has none. The one place the per-launch ranking is
    computed: the CLI, the Kernels page and its export show this."""
    import polars as pl

    rows = []
    peaks = peaks_for(gpu, measured)
    have = set(analyzed.columns)
    for r in analyzed.select([c for c in ("id", *FINDING_INPUTS) if c in have]).iter_rows(
        named=True
    ):
        b = bounds(r, gpu, peaks)
        fs = kernel_findings(r, gpu, measured, peaks, b, detail=False)
        f = fs[0] if fs else None
        rows.append(
            {
                "id": r["id"],
                "top_finding_key": f.key if f else None,
                "top_finding": f.title if f else None,
                "lost_ns": f.lost_ns if f else None,
                "lost_share": f.share if f else None,
                "bound": bound_of(r, gpu, measured, peaks, b),
            }
        )
    return pl.DataFrame(rows, schema={k: getattr(pl, v) for k, v in TOP_FINDING_SCHEMA.items()})
