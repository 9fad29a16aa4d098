"""Source hot spots of one profiled launch: which SASS instructions (and CUDA source lines, when the
binary had `-lineinfo`) the warps spent their time on, and why.

More: docs/architecture.md, *analyzers.source_hotspots*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

SAMPLES = "smsp__pcsamp_sample_count"
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
#: stall reason -> (label, what the warp waits for); after NVIDIA's Kernel Profiling Guide, "Warp
#: Stall Reasons"
STALL_REASONS: dict[str, tuple[str, str]] = {
    "long_scoreboard": (
        "long scoreboard",
        "an L1TEX result: global, local, texture or surface memory",
    ),
    "short_scoreboard": (
        "short scoreboard",
        "an MIO result: shared memory or a special-function (MUFU) op",
    ),
    "wait": ("wait", "a fixed-latency dependency of the previous instruction"),
    "barrier": ("barrier", "sibling warps at a block barrier (__syncthreads)"),
    "membar": ("memory barrier", "a memory fence to complete"),
    "mio_throttle": (
        "MIO throttle",
        "room in the MIO queue (shared memory, special math, dynamic branches)",
    ),
    "lg_throttle": ("LG throttle", "room in the local/global memory instruction queue"),
    "tex_throttle": ("TEX throttle", "room in the texture unit's queue"),
    "math_pipe_throttle": ("math pipe throttle", "the math pipe it needs to be free"),
    "dispatch_stall": ("dispatch stall", "the dispatcher (a pipeline conflict)"),
    "branch_resolving": ("branch resolving", "a branch target to be computed"),
    "no_instructions": ("no instructions", "instructions to be fetched (instruction-cache miss)"),
    "imc_miss": ("IMC miss", "an immediate-constant cache miss"),
    "drain": ("drain", "memory stores to drain after EXIT"),
    "sleeping": ("sleeping", "its sleep (nanosleep, yield) to end"),
    "warpgroup_arrive": ("warpgroup arrive", "a warpgroup barrier (wgmma)"),
    "not_selected": ("not selected", "nothing: it was eligible, another warp issued"),
    "selected": ("selected (issuing)", "nothing: it issued an instruction"),
    "misc": ("misc", "other causes"),
}
NOT_STALLS = ("selected", "not_selected")


def reason_label(r: str) -> str:
    return STALL_REASONS.get(r, (r.replace("_", " "), ""))[0]


@dataclass
class SourceHotspots:
    launch_id: int
    # one row per address, ranked: offset, sass, file, line, samples, sample_share,
    sass: pl.DataFrame
    # inst_executed, thread_inst_executed, top_reasons,
    # stall_<reason>...
    # one row per (file, line) when the report has line info, ranked the same way
    lines: pl.DataFrame
    # reason, label, waits_for, samples, share (of all samples), summed over the launch
    reasons: pl.DataFrame
    total_samples: int
    total_inst_executed: float
    has_samples: bool
    has_lines: bool
    # what the report lacks, with the ncu option collecting it
    missing: list[str] = field(default_factory=list)


def _top_reasons(df: pl.DataFrame, reasons: list[str], k: int = 3) -> list[str]:
    """'long scoreboard 71 %, wait 12 %' per row: the k biggest stall reasons of its samples
    (issuing and reasons under 1 % left out)."""
    out = []
    for row in df.select([f"stall_{r}" for r in reasons] + ["samples"]).iter_rows():
        total = row[-1] or 0
        pairs = sorted(
            (
                (v, r)
                for v, r in zip(row[:-1], reasons)
                if r not in NOT_STALLS and v and total and v / total >= 0.01
            ),
            reverse=True,
        )
        out.append(
            ", ".join(f"{reason_label(r)} {100 * v / total:.0f} %" for v, r in pairs[:k])
            if total
            else ""
        )
    return out


def source_hotspots(
    sass: pl.DataFrame, metrics: pl.DataFrame, files: pl.DataFrame | None, launch_id: int
) -> SourceHotspots | None:
    """The hot spots of one launch (module docstring); None when the report has no source data for it."""
    s = sass.filter(pl.col("id") == launch_id)
    if not s.height:
        return None
    m = metrics.filter(pl.col("id") == launch_id)
    names = set(m["metric"].unique().to_list())
    reasons = sorted(
        n[len(STALL_PREFIX) :]
        for n in names
        if n.startswith(STALL_PREFIX) and not n.endswith("_not_issued")
    )
    keep = {
        SAMPLES: "samples",
        "inst_executed": "inst_executed",
        "thread_inst_executed": "thread_inst_executed",
        **{STALL_PREFIX + r: f"stall_{r}" for r in reasons},
    }
    wide = (
        m.filter(pl.col("metric").is_in(list(keep)))
        .with_columns(pl.col("metric").replace_strict(keep))
        .pivot(on="metric", index="address", values="value", aggregate_function="sum")
    )
    for col in keep.values():
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(col))
    df = s.join(wide, on="address", how="left").with_columns(
        pl.col("samples").fill_null(0), pl.col("inst_executed").fill_null(0)
    )
    total = float(df["samples"].sum())
    df = df.with_columns(
        (pl.col("samples") / total if total else pl.lit(None, pl.Float64)).alias("sample_share")
    )
    df = df.sort(["samples", "inst_executed", "offset"], descending=[True, True, False])
    df = df.with_columns(pl.Series("top_reasons", _top_reasons(df, reasons), dtype=pl.String))
    cols = [
        "offset",
        "address",
        "sass",
        "file",
        "line",
        "samples",
        "sample_share",
        "inst_executed",
        "thread_inst_executed",
        "top_reasons",
    ] + [f"stall_{r}" for r in reasons]
    df = df.select(cols)
    has_lines = bool(df["line"].is_not_null().any())
    lines = pl.DataFrame()
    if has_lines:
        agg = [
            pl.col("samples").sum(),
            pl.col("inst_executed").sum(),
            pl.col("thread_inst_executed").sum(),
            pl.len().alias("instructions"),
            *[pl.col(f"stall_{r}").sum() for r in reasons],
        ]
        lines = (
            df.drop_nulls("line")
            .group_by("file", "line")
            .agg(agg)
            .with_columns(
                (pl.col("samples") / total if total else pl.lit(None, pl.Float64)).alias(
                    "sample_share"
                )
            )
        )
        lines = lines.sort(["samples", "inst_executed", "line"], descending=[True, True, False])
        lines = lines.with_columns(
            pl.Series("top_reasons", _top_reasons(lines, reasons), dtype=pl.String),
            pl.Series("code", _line_texts(lines, files), dtype=pl.String),
        )
    rs = pl.DataFrame(
        {
            "reason": reasons,
            "label": [reason_label(r) for r in reasons],
            "waits_for": [STALL_REASONS.get(r, ("", ""))[1] for r in reasons],
            "samples": [float(df[f"stall_{r}"].fill_null(0).sum()) for r in reasons],
        },
        schema={
            "reason": pl.String,
            "label": pl.String,
            "waits_for": pl.String,
            "samples": pl.Float64,
        },
    )
    rs = rs.with_columns(
        (pl.col("samples") / total if total else pl.lit(None, pl.Float64)).alias("share")
    ).sort("samples", descending=True)
    missing = []
    if not total:
        missing.append(
            "warp-state samples (smsp__pcsamp_*): collect with ncu --section WarpStateStats "
            "--section SourceCounters (in --set full)"
        )
    if not has_lines:
        missing.append(
            "CUDA source lines: compile with nvcc -lineinfo (and record with ncu --import-source "
            "yes to keep the source text)"
        )
    return SourceHotspots(
        launch_id,
        df,
        lines,
        rs,
        int(total),
        float(df["inst_executed"].sum()),
        total > 0,
        has_lines,
        missing,
    )


def _line_texts(lines: pl.DataFrame, files: pl.DataFrame | None) -> list[str | None]:
    """The text of each (file, line) from the report's imported source files (None where not imported)."""
    content: dict[str, list[str]] = {}
    if files is not None and files.height:
        for f, text in files.iter_rows():
            if text:
                content[f] = text.splitlines()
    out = []
    for f, ln in lines.select("file", "line").iter_rows():
        body = content.get(f)
        out.append(body[ln - 1].strip() if body and ln and 0 < ln <= len(body) else None)
    return out
