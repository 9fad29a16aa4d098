"""Per-kernel analyzers over the normalized Nsight Compute kernel table
(collectors.ncu.KERNEL_SCHEMA).

Pure functions: a table and a GPUSpec in, a table out. Formulas are in each function's docstring. A
quantity whose counters a report lacks comes out null (never zero); `missing_quantities` says which
counters are missing and which ncu option collects them.
"""

from __future__ import annotations


import polars as pl

from analyzers.gpus import GPUSpec
from analyzers.occupancy import occupancy
from analyzers.quantities import missing_label, requirements

SECTOR_BYTES = 32  # an L1/L2 sector (Kernel Profiling Guide)

#: quantity -> (counters it needs, the ncu option that collects them): the catalog's
#: (analyzers.quantities)
REQUIREMENTS: dict[str, tuple[tuple[str, ...], str]] = requirements()

#: tensor-core source types, in the order of the kernel table's tensor_flop_<type> columns
TENSOR_TYPES = ("bf16", "fp16", "tf32", "fp8", "fp64")
#: dense tensor rate of each type relative to dense BF16 (GPUSpec.bf16_dense_flop_per_s, FP32
#: accumulate), as NVIDIA's datasheets give it since Ampere: TF32 = 1/2, FP8 = 2x (A100 156 / 312
#: TFLOP/s TF32 / BF16; H100 SXM 494.7 / 989.4 / 1978.9 TF32 / BF16 / FP8). FP64 tensor work has its
#: own peak and is not rated here.
TENSOR_RATE = {"bf16": 1.0, "fp16": 1.0, "tf32": 0.5, "fp8": 2.0}


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


def dram_bandwidth_gbps(read_bytes: pl.Expr, write_bytes: pl.Expr, duration_ns: pl.Expr) -> pl.Expr:
    """Achieved DRAM bandwidth [GB/s] = (bytes read + bytes written) / duration [ns] (bytes/ns =
    GB/s): the one place this is computed (ncu reports, bench counter records)."""
    return _ratio(read_bytes + write_bytes, duration_ns)


def conflict_degree(wavefronts: pl.Expr, conflicts: pl.Expr) -> pl.Expr:
    """Bank-conflict degree [ways] = wavefronts / (wavefronts - conflicts): a conflict is a
    wavefront beyond the minimum the instruction needs, so this is actual / ideal wavefronts (1 =
    conflict-free, 32 = every lane serialised). The one place this is computed (ncu reports, bench
    counter records)."""
    return _ratio(wavefronts, wavefronts - conflicts)


def conflict_degree_of(wavefronts: float, conflicts: float) -> float | None:
    """conflict_degree for one pair of counter values (the same expression, evaluated on one row)."""
    return pl.select(conflict_degree(pl.lit(float(wavefronts)), pl.lit(float(conflicts)))).item()


def memory_metrics(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """DRAM, L2 and L1 traffic of each launch.

    dram_bandwidth_gbps = (dram__bytes_read.sum + dram__bytes_write.sum) / gpu__time_duration.sum  [bytes/ns = GB/s]
    dram_peak_fraction  = achieved / the GPU's spec-sheet peak (GPUSpec.dram_bandwidth_bytes_per_s)
    dram_counter_peak_gbps = dram__bytes.sum.peak_sustained [B/cycle] x dram__cycles_elapsed.avg.per_second
                          (the peak Nsight Compute's roofline uses; from counters)
    l2_bytes = lts__t_sectors.sum x 32 B;  l2_read_from_l1_bytes = lts__t_sectors_srcunit_tex_op_read.sum x 32 B
    flop_fp32 = (fadd + fmul + 2 x ffma thread instructions per cycle) x SMSP cycles/s x duration
    """
    spec = gpu.dram_bandwidth_bytes_per_s
    bw = dram_bandwidth_gbps(
        pl.col("dram_read_bytes"), pl.col("dram_write_bytes"), pl.col("duration_ns")
    )
    return k.with_columns(
        dram_bytes=pl.col("dram_read_bytes") + pl.col("dram_write_bytes"),
        dram_bandwidth_gbps=bw,
        dram_peak_fraction=(bw * 1e9 / spec) if spec else pl.lit(None, pl.Float64),
        dram_counter_peak_gbps=pl.col("dram_peak_bytes_per_cycle") * pl.col("dram_clock_hz") / 1e9,
        l2_bytes=pl.col("l2_sectors") * SECTOR_BYTES,
        l2_read_from_l1_bytes=pl.col("l2_read_sectors_from_l1") * SECTOR_BYTES,
        l1_global_ld_bytes=pl.col("global_ld_sectors") * SECTOR_BYTES,
        flop_fp32=(
            pl.col("fadd_per_cycle") + pl.col("fmul_per_cycle") + 2 * pl.col("ffma_per_cycle")
        )
        * pl.col("smsp_clock_hz")
        * pl.col("duration_ns")
        * 1e-9,
    )


def tensor_metrics(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """Tensor-core work of each launch from the ops-path counters
    (sm__ops_path_tensor_src_<type>.sum, in FLOP).

    flop_tensor = sum over types of tensor_flop_<type> (bf16, fp16, tf32, fp8 dense, fp64)       [FLOP]
    tensor_type = the type with the most FLOP (null when the launch has none)
    tensor_tflops = flop_tensor / duration                                                      [TFLOP/s]
    tensor_peak_fraction = sum over types of (FLOP / TENSOR_RATE[type]) / duration / the GPU's dense BF16 spec:
        the fraction of the tensor peak for the types the launch used (FP64 tensor work is left out: null for
        a launch whose only tensor work is FP64)
    Reports stored before these columns existed, or collected without them, give nulls.
    """
    cols = [f"tensor_flop_{t}" for t in TENSOR_TYPES]
    k = k.with_columns([pl.lit(None, pl.Float64).alias(c) for c in cols if c not in k.columns])
    total = pl.sum_horizontal(cols)
    known = pl.any_horizontal([pl.col(c).is_not_null() for c in cols])
    biggest = pl.concat_list([pl.col(c).fill_null(0) for c in cols]).list.arg_max()
    bf16_equiv = pl.sum_horizontal([pl.col(f"tensor_flop_{t}") / r for t, r in TENSOR_RATE.items()])
    rated = pl.any_horizontal([pl.col(f"tensor_flop_{t}").fill_null(0) > 0 for t in TENSOR_RATE])
    spec = gpu.bf16_dense_flop_per_s
    return k.with_columns(
        flop_tensor=pl.when(known).then(total),
        tensor_type=pl.when(known & (total > 0)).then(
            biggest.replace_strict(
                list(range(len(TENSOR_TYPES))), list(TENSOR_TYPES), return_dtype=pl.String
            )
        ),
        tensor_tflops=pl.when(known & (pl.col("duration_ns") > 0)).then(
            total / pl.col("duration_ns") / 1e3
        ),
        tensor_peak_fraction=(
            pl.when(known & (pl.col("duration_ns") > 0) & (rated | (total == 0))).then(
                bf16_equiv / pl.col("duration_ns") * 1e9 / spec
            )
        )
        if spec
        else pl.lit(None, pl.Float64),
    )


def bank_conflicts(k: pl.DataFrame) -> pl.DataFrame:
    """Shared-memory bank conflicts from the L1 data-pipe counters, for loads, stores and both.

    A conflict is a wavefront beyond the minimum the instruction needs, so
        ideal wavefronts = wavefronts - conflicts
        degree (average ways) = wavefronts / ideal wavefronts     (1 = conflict-free; 32 = every lane serialised)
        n-way per request (ncu's rule) = wavefronts / shared-memory instructions
    """
    w = pl.col("smem_ld_wavefronts") + pl.col("smem_st_wavefronts")
    c = pl.col("smem_ld_bank_conflicts") + pl.col("smem_st_bank_conflicts")
    return k.with_columns(
        smem_ld_conflict_degree=conflict_degree(
            pl.col("smem_ld_wavefronts"), pl.col("smem_ld_bank_conflicts")
        ),
        smem_st_conflict_degree=conflict_degree(
            pl.col("smem_st_wavefronts"), pl.col("smem_st_bank_conflicts")
        ),
        smem_wavefronts=w,
        smem_bank_conflicts=c,
        smem_conflict_degree=conflict_degree(w, c),
        smem_ld_wavefronts_per_request=_ratio(
            pl.col("smem_ld_wavefronts"),
            pl.col("smem_ld_requests") + pl.col("smem_ldsm_requests").fill_null(0),
        ),
    )


def coalescing(k: pl.DataFrame) -> pl.DataFrame:
    """Global-load coalescing.

    sectors per request = l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum /
    l1tex__t_requests_..._op_ld.sum bytes used per sector =
    smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio (32 = all used) ideal sectors
    per request = ceil(sectors/request x bytes used per sector / 32): the sectors a warp's requested
    bytes would need if they were contiguous (4 for 4-byte accesses, 16 for 16-byte ones)
    coalescing_ratio = sectors per request / ideal (1 = fully coalesced; 8 = eight times the sectors
    needed)
    """
    spr = _ratio(pl.col("global_ld_sectors"), pl.col("global_ld_requests"))
    ideal = (spr * pl.col("global_ld_bytes_per_sector") / SECTOR_BYTES).ceil().clip(lower_bound=1)
    return k.with_columns(
        global_ld_sectors_per_request=spr,
        global_ld_ideal_sectors_per_request=ideal,
        global_ld_coalescing_ratio=_ratio(spr, ideal),
        global_st_sectors_per_request=_ratio(
            pl.col("global_st_sectors"), pl.col("global_st_requests")
        ),
    )


def occupancy_metrics(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """Theoretical occupancy from our calculator (analyzers.occupancy, the CUDA occupancy rules) for
    each launch's block size, registers, static + dynamic shared memory and the shared-memory
    configuration the driver chose (launch__shared_mem_config_size), next to ncu's own theoretical
    and achieved occupancy. Null where the rules do not apply: a GPU outside CC 7.0-12.x, or one
    whose per-SM limits are unknown."""

    def one(block, regs, smem_static, smem_dynamic, smem_config, barriers) -> tuple:
        if block is None or regs is None:
            return None, None, None
        try:
            res = occupancy(
                gpu,
                int(block),
                int(regs),
                int(smem_static or 0),
                int(smem_dynamic or 0),
                smem_config_bytes=int(smem_config) if smem_config else None,
                barriers_per_block=int(barriers) if barriers is not None else 1,
            )
        except ValueError:  # outside the rules' compute capabilities, or limits unknown
            return None, None, None
        return res.occupancy_pct, "+".join(res.limiters), res.blocks_per_sm

    # one computation per launch configuration (launches of a kernel share it)
    known: dict[tuple, tuple] = {}
    preds, lims, blocks = [], [], []
    for r in k.select(
        "block_size",
        "registers_per_thread",
        "smem_static_bytes",
        "smem_dynamic_bytes",
        "smem_config_bytes",
        "barrier_count",
    ).iter_rows():
        got = known.get(r)
        if got is None:
            got = known[r] = one(*r)
        preds.append(got[0])
        lims.append(got[1])
        blocks.append(got[2])
    return k.with_columns(
        predicted_occupancy_pct=pl.Series(preds, dtype=pl.Float64),
        occupancy_limiter=pl.Series(lims, dtype=pl.String),
        predicted_blocks_per_sm=pl.Series(blocks, dtype=pl.Int64),
    )


def display_name(name: str | None) -> str | None:
    """A demangled kernel name as a table shows it: the function with its namespace path and
    template arguments, without return type and parameter list (`void ns::smem_column<32>(float*,
    int)` -> `ns::smem_column<32>`), so launches of `smem_column<32>` and `smem_column<33>` are told
    apart."""
    if not name:
        return name
    anon = "(anonymous namespace)"
    name = name.replace(anon, "\x00")
    depth, end = 0, len(name)
    # the parameter list: the first '(' outside template brackets
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            end = i
            break
    head = name[:end].strip()
    depth, cut = 0, 0
    # the return type: up to the last space outside template brackets
    for i, ch in enumerate(head):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            cut = i + 1
    return (head[cut:] or name).replace("\x00", anon)


def analyze_kernels(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """All per-kernel analyzers in one table (with `display_name`, see display_name)."""
    # the run's display label (collectors.kernel_names.display_names: the function name, with its
    # template arguments where two kernels of the run share it), else the name without return type
    # and parameters
    shown = pl.col("kernel_name").map_elements(display_name, return_dtype=pl.String)
    k = k.with_columns(
        (pl.coalesce(pl.col("short_name"), shown) if "short_name" in k.columns else shown).alias(
            "display_name"
        )
    )
    return occupancy_metrics(
        coalescing(bank_conflicts(tensor_metrics(memory_metrics(k, gpu), gpu))), gpu
    )


def missing_quantities(analyzed: pl.DataFrame) -> list[dict]:
    """Quantities that no launch of the report has, with the counters they need and how to collect them."""
    out = []
    for q, (metrics, how) in REQUIREMENTS.items():
        if q in analyzed.columns and analyzed[q].null_count() == analyzed.height:
            out.append(
                {
                    "quantity": q,
                    "label": missing_label(q),
                    "needs": list(metrics),
                    "collect_with": f"ncu {how}",
                }
            )
    return out


def missing_groups(missing: list[dict]) -> list[dict]:
    """The missing quantities grouped by the ncu option that collects them: one entry (one warning)
    per counter group, {collect_with, labels, quantities, needs}."""
    groups: dict[str, dict] = {}
    for m in missing:
        g = groups.setdefault(
            m["collect_with"],
            {"collect_with": m["collect_with"], "labels": [], "quantities": [], "needs": []},
        )
        g["labels"].append(m.get("label") or m["quantity"])
        g["quantities"].append(m["quantity"])
        g["needs"] += [n for n in m["needs"] if n not in g["needs"]]
    return list(groups.values())
