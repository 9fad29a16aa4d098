"""One Nsight Compute run analysed: the object every surface renders (CLI table / JSON / CSV,
Kernels page, export).

More: docs/architecture.md, *analyzers.ncu_run*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzers.ceilings import Ceiling
from analyzers.findings import top_findings
from analyzers.gpus import GPUSpec
from analyzers.kernels import analyze_kernels, missing_quantities
from analyzers.plausibility import launch_flags


@dataclass
class NcuAnalysis:
    gpu: GPUSpec
    kernels: pl.DataFrame
    missing: list[dict]
    measured: dict[str, Ceiling] = field(default_factory=dict)
    gpu_how: str | None = None  # how the GPU was identified (analyzers.gpu_identify)
    gpu_warning: str | None = None  # an inference or ambiguity the user should know about
    over_peak: list[dict] = field(default_factory=list)

    @property
    def flagged(self) -> list[dict]:
        """[{id, name, flags}] of the launches with a plausibility flag (analyzers.plausibility)."""
        f = self.kernels.filter(pl.col("flags").list.len() > 0)
        return [
            {"id": r["id"], "name": r["short_name"], "flags": r["flags"]}
            for r in f.select("id", "short_name", "flags").iter_rows(named=True)
        ]

    def launch(self, launch_id: int) -> dict | None:
        rows = self.kernels.filter(pl.col("id") == launch_id)
        return rows.row(0, named=True) if rows.height else None


def analyze_ncu(
    kernels: pl.DataFrame,
    gpu: GPUSpec,
    measured: dict[str, Ceiling] | None = None,
    *,
    gpu_how: str | None = None,
    gpu_warning: str | None = None,
) -> NcuAnalysis:
    """Every per-launch quantity of one ncu run, computed once (see the module docstring)."""
    measured = measured or {}
    a = analyze_kernels(kernels, gpu)
    dram_ceiling = measured["dram"].value if measured.get("dram") else None
    a = a.with_columns(
        dram_measured_fraction=(pl.col("dram_bandwidth_gbps") * 1e9 / dram_ceiling)
        if dram_ceiling
        else pl.lit(None, pl.Float64),
        fp32_tflops=pl.when(pl.col("duration_ns") > 0).then(
            pl.col("flop_fp32") / pl.col("duration_ns") / 1e3
        ),
        flop_total=pl.when(
            pl.col("flop_fp32").is_not_null() | pl.col("flop_tensor").is_not_null()
        ).then(pl.sum_horizontal("flop_fp32", "flop_tensor")),
    ).with_columns(
        fp32_peak_fraction=(pl.col("fp32_tflops") * 1e12 / gpu.fp32_flop_per_s)
        if gpu.fp32_flop_per_s
        else pl.lit(None, pl.Float64),
        arithmetic_intensity=pl.when(pl.col("dram_bytes") > 0).then(
            pl.col("flop_total") / pl.col("dram_bytes")
        ),
    )
    a = a.join(top_findings(a, gpu, measured), on="id", how="left")
    a = a.join(launch_flags(a, gpu), on="id", how="left")
    # a launch ncu did not measure (failed or cut-off collection: no duration) says so instead of
    # blanks
    a = a.with_columns(
        pl.when(pl.col("duration_ns").is_null())
        .then(
            pl.lit("not measured: Nsight Compute's collection of this launch failed or was cut off")
        )
        .otherwise(pl.col("top_finding"))
        .alias("top_finding")
    )
    return NcuAnalysis(
        gpu,
        a,
        missing_quantities(a),
        dict(measured),
        gpu_how,
        gpu_warning,
        over_peak_notes(a, gpu, measured),
    )


#: share columns that can pass 100 %, and the peak they divide by
SHARE_COLUMNS = {
    "dram_peak_fraction": "the spec sheet's DRAM bandwidth",
    "dram_measured_fraction": "the measured copy ceiling",
    "tensor_peak_fraction": "the spec sheet's tensor-core peak",
    "fp32_peak_fraction": "the spec sheet's FP32 peak",
}


def over_peak_notes(a: pl.DataFrame, gpu: GPUSpec, measured: dict[str, Ceiling]) -> list[dict]:
    """Every share of a peak above 100 % (rounded: above 100.05 %) with the reason it can be, from
    the launch's own counters: {id, column, pct, peak, reason}."""
    out = []
    cols = [c for c in SHARE_COLUMNS if c in a.columns]
    for r in a.select(
        "id", *cols, "dram_counter_peak_gbps", "dram_read_bytes", "dram_bytes", "sm_clock_hz"
    ).iter_rows(named=True):
        for c in cols:
            v = r[c]
            if v is None or v <= 1.0005:
                continue
            clk = r["sm_clock_hz"]
            clk_txt = f"{clk / 1e9:.2f} GHz" if clk else "an unknown clock"
            if c == "dram_peak_fraction":
                cp = r["dram_counter_peak_gbps"]
                spec = (gpu.dram_bandwidth_bytes_per_s or 0) / 1e9
                reason = (
                    f"the spec sheet's {spec:,.0f} GB/s is below this GPU's DRAM peak by its own "
                    f"counters, {cp:,.0f} GB/s (dram__bytes.sum.peak_sustained × DRAM clock)"
                    if cp and cp > spec
                    else "above the counters' own DRAM peak too"
                    + (f" ({cp:,.0f} GB/s)" if cp else "")
                    + ": the counters count more than "
                    "the bus moved (e.g. ECC or replayed traffic); read it as at the peak"
                )
            elif c == "dram_measured_fraction":
                rd = r["dram_read_bytes"] / r["dram_bytes"] if r["dram_bytes"] else None
                mix = f" ({rd:.0%} of this launch's bytes are reads)" if rd is not None else ""
                reason = (
                    "the measured ceiling is the best read + write copy `kernelscope bench` "
                    "reached, not a hardware limit: traffic that mostly reads or mostly writes can "
                    "go faster" + mix
                )
            else:
                boost = gpu.boost_clock_mhz
                reason = (
                    "the datasheet quotes this peak at NVIDIA's reference clock; this launch ran "
                    f"its SMs at {clk_txt} (ncu: gpc__cycles_elapsed.avg.per_second)"
                    + (f", the GPU's boost clock is {boost / 1e3:.2f} GHz" if boost else "")
                    + ", so the hardware peak at this clock is above the datasheet's"
                )
            out.append(
                {
                    "id": r["id"],
                    "column": c,
                    "pct": 100 * v,
                    "peak": SHARE_COLUMNS[c],
                    "reason": reason,
                }
            )
    return out
