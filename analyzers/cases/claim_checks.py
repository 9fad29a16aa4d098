"""Generic checks for the claims of the "whitepaper" seed: each takes a claim's stated facts
(numbers, names, code as written) and returns a Finding — a verdict and the evidence sentence —
computed from the GPU registry, the case models, the occupancy calculator, the bank model, Nsight
Compute's metric names, the PTX ISA's fragment sizes, GCC's builtin semantics and checkable
citations (analyzers/cases/claim_evidence.json says where each comes from). No verdict is written
per claim: a claim lists the checks that apply to it and its facts; change a fact and the verdict
follows.

Severity (a claim's verdict is its most severe finding): above-peak > unit-error > refuted >
self-contradictory > implausible > unverifiable > plausible.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from analyzers.cases.s52_operator import bank_conflicts, column_read_addresses
from analyzers.gpus import get_gpu
from analyzers.occupancy import occupancy
from analyzers.units import fmt

SEVERITY = (
    "above-peak",
    "unit-error",
    "refuted",
    "self-contradictory",
    "implausible",
    "unverifiable",
    "plausible",
)
EVIDENCE_FILE = Path(__file__).with_name("claim_evidence.json")
#: the best a real kernel reaches, as a fraction of the spec (bench-anchors.md §3.1, §3.4):
#: streaming DRAM kernels 85–93 % (write-only 97 %), cuBLAS BF16/FP16 GEMMs 80–87 %
ACHIEVABLE = {"dram": 0.93, "tensor": 0.87}


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str
    text: str
    details: dict = field(default_factory=dict)


@lru_cache(maxsize=1)
def evidence() -> dict:
    return json.loads(EVIDENCE_FILE.read_text(encoding="utf-8"))


def _f(check: str, verdict: str, text: str, **details) -> Finding:
    return Finding(check, verdict, text, details)


# ---- numbers against the hardware
# --------------------------------------------------------------------------------


def rate_vs_peak(facts: dict) -> Finding:
    """A claimed rate (`rate`, `unit` as written: GFLOPS or TFLOPS; `gpu`, `peak_field`) against the
    GPU's spec peak: above it → above-peak; read in its written unit far below any tuned kernel but
    at the peak ×1000 → unit-error; above what real kernels reach (ACHIEVABLE["tensor"]) →
    implausible."""
    g = get_gpu(facts["gpu"])
    peak = getattr(g, facts.get("peak_field", "bf16_dense_flop_per_s"))
    scale = {"GFLOPS": 1e9, "TFLOPS": 1e12, "TFLOP/s": 1e12}[facts["unit"]]
    v = facts["rate"] * scale
    frac = v / peak
    src = f"the {g.name}'s {fmt(peak, 'FLOP/s')} dense peak (registry: {g.source_of(facts.get('peak_field', 'bf16_dense_flop_per_s'))})"
    if frac > 1.02:
        return _f(
            "rate_vs_peak",
            "above-peak",
            f"{facts['rate']:g} {facts['unit']} is {frac:.1f}× {src}.",
            fraction=frac,
        )
    if frac < 0.01 and 0.5 <= frac * 1000 <= 1.02:
        return _f(
            "rate_vs_peak",
            "unit-error",
            f"as written, {facts['rate']:g} {facts['unit']} is {frac:.2%} of {src} — far too slow "
            f"for a tuned kernel; read as TFLOP/s it is {1000 * frac:.0%} of that peak"
            + (
                ", i.e. the datasheet number itself, which no real kernel reaches"
                if frac * 1000 > 0.98
                else ""
            )
            + ".",
            fraction=frac,
            fraction_if_tera=frac * 1000,
        )
    if frac > ACHIEVABLE["tensor"]:
        return _f(
            "rate_vs_peak",
            "implausible",
            f"{facts['rate']:g} {facts['unit']} is {frac:.0%} of {src}; cuBLAS GEMMs reach 80–87 % "
            "(bench-anchors §3.4).",
            fraction=frac,
        )
    return _f(
        "rate_vs_peak",
        "plausible",
        f"{facts['rate']:g} {facts['unit']} is {frac:.0%} of {src}.",
        fraction=frac,
    )


def fraction_vs_anchor(facts: dict) -> Finding:
    """A claimed share of the DRAM spec (`pct`) against 100 % and the best public streaming kernels (93 %)."""
    pct = facts["pct"]
    if pct > 100:
        return _f(
            "fraction_vs_anchor", "above-peak", f"{pct:g} % of the DRAM peak is more than the peak."
        )
    if pct / 100 > ACHIEVABLE["dram"]:
        return _f(
            "fraction_vs_anchor",
            "implausible",
            f"{pct:g} % of the DRAM spec is above what the best public streaming kernels reach "
            "(85–93 %, write-only up to 97 %: bench-anchors §3.1).",
        )
    return _f(
        "fraction_vs_anchor",
        "plausible",
        f"{pct:g} % of the DRAM spec is within what streaming kernels reach.",
    )


def gemm_traffic(facts: dict) -> Finding:
    """A GEMM (M = N = K = `n`, `elem` bytes) said to run at `bandwidth` GB/s of DRAM: at the GPU's
    tensor peak it takes at least 2n³ / peak; at that bandwidth it then moves bandwidth × time bytes
    — compared with the 3n²·e it must move. A GEMM this size is compute-bound; DRAM traffic of more
    than 2× its compulsory bytes means poor tiling, not an optimisation."""
    g = get_gpu(facts["gpu"])
    n, e = facts["n"], facts["elem"]
    t_min = 2 * n**3 / g.bf16_dense_flop_per_s
    moved = facts["bandwidth"] * 1e9 * t_min
    compulsory = 3 * n * n * e
    k = moved / compulsory
    balance = g.bf16_dense_flop_per_s / g.dram_bandwidth_bytes_per_s
    intensity = 2 * n**3 / compulsory
    txt = (
        f"the test kernel is a GEMM with M = N = K = {n}: {intensity:.0f} FLOP per compulsory byte "
        f"against the {g.name}'s {balance:.0f} FLOP/B balance, so it is compute-bound and needs ≥ "
        f"{fmt(t_min, 's')} at the {fmt(g.bf16_dense_flop_per_s, 'FLOP/s')} peak; at "
        f"{facts['bandwidth']:g} GB/s it then moves {fmt(moved, 'B')}, {k:.0f}× the "
        f"{fmt(compulsory, 'B')} it must move"
    )
    if k > 2:
        return _f(
            "gemm_traffic",
            "self-contradictory",
            txt + ": near-peak DRAM utilisation of a "
            "GEMM is a symptom of poor tiling, so the table's 'optimisation' is the opposite of "
            "one.",
            traffic_factor=k,
        )
    return _f("gemm_traffic", "plausible", txt + ".", traffic_factor=k)


def arithmetic(facts: dict) -> Finding:
    """Stated results recomputed: `sums` is a list of (expression text, computed value, stated value, rel tol)."""
    bad = [
        f"{txt} = {calc:.4g}, not {stated:g}"
        for txt, calc, stated, tol in facts["sums"]
        if not math.isclose(calc, stated, rel_tol=tol)
    ]
    if bad:
        return _f(
            "arithmetic",
            "self-contradictory",
            "the text's own arithmetic is wrong: " + "; ".join(bad) + ".",
        )
    return _f(
        "arithmetic",
        "plausible",
        "the arithmetic holds ("
        + "; ".join(f"{t} = {c:.4g}" for t, c, _, _ in facts["sums"])
        + ").",
    )


def same_quantity(facts: dict) -> Finding:
    """One quantity (`quantity`) stated in several places (`statements`: (where, value)) must agree within `tol`."""
    vals = facts["statements"]
    lo, hi = min(v for _, v in vals), max(v for _, v in vals)
    listed = ", ".join(f"{v:g}{facts.get('unit', '')} ({w})" for w, v in vals)
    if hi > lo * (1 + facts.get("tol", 0.02)):
        return _f(
            "same_quantity",
            "self-contradictory",
            f"{facts['quantity']} is given as {listed}: the same quantity with different values.",
        )
    return _f("same_quantity", "plausible", f"{facts['quantity']}: {listed} agree.")


def registry_fact(facts: dict) -> Finding:
    """A stated device fact (`field`: sm_count, cc_major, memory_type, ...) against the registry."""
    g = get_gpu(facts["gpu"])
    field_ = facts["field"]
    real = g.cc[0] if field_ == "cc_major" else getattr(g, field_)
    stated = facts["stated"]
    name = {"cc_major": "compute capability major"}.get(field_, field_)
    src = g.source_of("cc" if field_ == "cc_major" else field_)
    if str(stated).lower() != str(real).lower():
        return _f(
            "registry_fact",
            "refuted",
            f"the text says {name} {stated}; the registry's {g.name} has {real} ({src}).",
        )
    return _f("registry_fact", "plausible", f"{name} {stated} as in the registry.")


def spec_bandwidth(facts: dict) -> Finding:
    """Memory bandwidths stated in several places (`statements`) against each other and the registry."""
    g = get_gpu(facts["gpu"])
    reg = g.dram_bandwidth_bytes_per_s / 1e9
    vals = facts["statements"]
    listed = ", ".join(f"{v:g} GB/s ({w})" for w, v in vals)
    if max(v for _, v in vals) > min(v for _, v in vals) * 1.05:
        return _f(
            "spec_bandwidth",
            "self-contradictory",
            f"the text gives {listed} for the same card; the registry's {g.name} has {reg:g} GB/s "
            f"({g.source_of('dram_bandwidth_bytes_per_s')}), {g.memory_type}.",
        )
    if not math.isclose(vals[0][1], reg, rel_tol=0.05):
        return _f(
            "spec_bandwidth", "refuted", f"{listed}, but the registry's {g.name} has {reg:g} GB/s."
        )
    return _f("spec_bandwidth", "plausible", f"{listed}, as in the registry.")


# ---- the seed's occupancy helper and bank rule, run as written
# ---------------------------------------------------


def whitepaper_calc_occupancy(
    regs_per_thread,
    sm_shmem_per_block,
    threads_per_block,
    max_threads_per_sm=1024,
    max_blocks_per_sm=32,
    total_regs_per_sm=65536,
    total_shmem_per_sm=49152,
):
    """The seed's `calc_occupancy`, unchanged: no allocation granularity, no reserved shared memory,
    a division by zero for a kernel without shared memory, and defaults that fit no GPU it targets."""
    blocks_by_regs = total_regs_per_sm // (regs_per_thread * threads_per_block)
    blocks_by_shmem = total_shmem_per_sm // sm_shmem_per_block
    blocks_by_threads = max_threads_per_sm // threads_per_block
    return min(blocks_by_regs, blocks_by_shmem, blocks_by_threads, max_blocks_per_sm)


def occupancy_helper(facts: dict) -> Finding:
    """The helper run as written (with the claim's `defaults`) on the claim's `table` rows, against
    its claimed blocks per SM (can the helper give them at all?) and against the real calculator on
    the claim's GPU."""
    g = get_gpu(facts["gpu"])
    d = facts["defaults"]
    rows, contra = [], []
    for row in facts["table"]:
        answers = {}
        for t in range(32, 1025, 32):
            try:
                answers[t] = whitepaper_calc_occupancy(row["regs"], row["smem"], t, **d)
            except ZeroDivisionError:
                answers[t] = "ZeroDivisionError"
        if row["claimed_blocks"] not in answers.values():
            ints = sorted({a for a in answers.values() if isinstance(a, int)})
            contra.append(
                f"config {row['config']} ({row['regs']} regs, {row['smem']} B) claims "
                f"{row['claimed_blocks']} blocks/SM but the helper "
                + (
                    "raises ZeroDivisionError (shared memory 0)"
                    if not ints
                    else f"gives at most {max(ints)} for any block size"
                )
            )
        for t in (32, 128, 256):
            real = occupancy(g, t, row["regs"], smem_static_bytes=row["smem"])
            rows.append(
                {
                    "config": row["config"],
                    "regs_per_thread": row["regs"],
                    "smem_per_block_B": row["smem"],
                    "threads_per_block": t,
                    "claimed_blocks": row["claimed_blocks"],
                    "helper_blocks": answers[t],
                    "real_blocks": real.blocks_per_sm,
                    "real_occupancy_pct": real.occupancy_pct,
                    "real_limiters": ", ".join(real.limiters),
                }
            )
    wrong = [
        f"{k}={v} ({g.name.replace('NVIDIA ', '')}: {a})"
        for k, v, a in (
            ("max_threads_per_sm", d["max_threads_per_sm"], g.max_threads_per_sm),
            ("total_shmem_per_sm", d["total_shmem_per_sm"], g.smem_per_sm_bytes),
            ("max_blocks_per_sm", d["max_blocks_per_sm"], g.max_blocks_per_sm),
            ("total_regs_per_sm", d["total_regs_per_sm"], g.regs_per_sm),
        )
        if v != a
    ]
    mismatch = [
        r
        for r in rows
        if isinstance(r["helper_blocks"], int) and r["helper_blocks"] != r["real_blocks"]
    ]
    tail = (
        f" Its defaults differ from the {g.name} (CC {g.cc[0]}.{g.cc[1]}): {', '.join(wrong)}."
        if wrong
        else ""
    ) + (
        " It ignores the 256-register and 128 B shared-memory allocation granularity and the "
        f"{g.reserved_smem_per_block_bytes} B reserved per block: the real calculator "
        f"(analyzers.occupancy) differs in {len(mismatch)} of {len(rows)} launches."
        if mismatch
        else ""
    )
    if contra:
        return _f(
            "occupancy_helper", "self-contradictory", "; ".join(contra) + "." + tail, rows=rows
        )
    if wrong or mismatch:
        return _f("occupancy_helper", "refuted", tail.strip(), rows=rows)
    return _f(
        "occupancy_helper",
        "plausible",
        "the helper reproduces its table and the real calculator.",
        rows=rows,
    )


def bank_rule(facts: dict) -> Finding:
    """The seed's tile-width rule evaluated with the bank model: the width it picks (`width` words)
    read down a column (lanes i·width) and along a row."""
    w = facts["width"]
    row = bank_conflicts(list(range(32)), 4).degree
    col = bank_conflicts(column_read_addresses(w), 4).degree
    pad = bank_conflicts(column_read_addresses(w + 1), 4).degree
    details = {
        "rows": [
            {"access": "row", "degree": row},
            {"access": f"column, stride {w}", "degree": col},
            {"access": f"column, stride {w + 1}", "degree": pad},
        ]
    }
    if col > 1:
        return _f(
            "bank_rule",
            "refuted",
            f"the rule picks {w}-word rows ({w}×4 B = {w * 4} B, a multiple of the 32 banks — "
            "bytes compared with a number of banks). The bank model: a row read is conflict-free "
            f"for any width (degree {row:g}), a column of a {w}-word-wide tile puts every lane in "
            f"one bank (degree {col:g}), rows padded to {w + 1} words give degree {pad:g}: the "
            "rule recommends the worst width for column access.",
            **details,
        )
    return _f(
        "bank_rule",
        "plausible",
        f"{w}-word rows: column reads conflict-free (degree {col:g}).",
        **details,
    )


def request_units(facts: dict) -> Finding:
    """'Bytes per request' figures (`before`, `after`) against what one warp request can touch (32
    sectors of 32 B) and the ideal for the access width (`width` bytes per lane)."""
    after, before, width = facts["after"], facts["before"], facts["width"]
    ideal = 32 * width
    if facts["unit"] == "sectors":
        if after > 32:
            return _f(
                "request_units",
                "unit-error",
                f"{after:g} sectors per request is impossible (a warp request touches at most 32 "
                "sectors).",
            )
        return _f("request_units", "plausible", f"{before:g} → {after:g} sectors per request.")
    if abs(after - 128) < 1 and width != 4:
        return _f(
            "request_units",
            "unit-error",
            f"ncu reports sectors per request; {after:g} bytes = {after / 32:.0f} sectors is the "
            f"coalesced ideal for 4-byte loads, but the rewritten kernel loads {width}-byte "
            f"values, whose ideal is {ideal} B = {ideal // 32} sectors per request; {before:g} B ≈ "
            f"{before / 32:.0f} sector. Units are mixed (sectors vs bytes, 4-byte vs {width}-byte "
            "accesses).",
        )
    if after > ideal * 1.02:
        return _f(
            "request_units",
            "above-peak",
            f"{after:g} B per request is more than a warp's {ideal} B.",
        )
    return _f(
        "request_units", "plausible", f"{before:g} → {after:g} B per request (ideal {ideal} B)."
    )


# ---- code that can run, names that exist, citations that can be checked
# -----------------------------------------


def api_exists(facts: dict) -> Finding:
    """Python names the claim's code uses (`torch_c`: attributes of torch._C; `tensor_attrs`:
    attributes read from a torch.Tensor) against the stubs of torch (claim_evidence.json): a name
    that does not exist makes the code fail, so what the claim reports from running it is refuted."""
    ev = evidence()
    missing = []
    for name in facts.get("torch_c", ()):
        if name.startswith("_dispatch_") and name not in ev["torch_c_dispatch"]["names"]:
            near = difflib.get_close_matches(name, ev["torch_c_dispatch"]["names"], n=2)
            missing.append(
                f"torch._C.{name} does not exist"
                + (f" (nearest: {', '.join(near)})" if near else "")
            )
    for name in facts.get("tensor_attrs", ()):
        if name in ev["torch_tensor"]["lacks"]:
            missing.append(f"a torch.Tensor has no attribute `{name}` (AttributeError)")
    src = ev["torch_c_dispatch"]["source"] if facts.get("torch_c") else ev["torch_tensor"]["source"]
    if missing:
        return _f(
            "api_exists",
            "refuted",
            "the code cannot run: " + "; ".join(missing) + f" "
            f"({src}). What the text reports from running it did not come from that code.",
        )
    return _f("api_exists", "plausible", "every name the code uses exists in torch's stubs.")


def metric_exists(facts: dict) -> Finding:
    """Nsight Compute metric names (`metrics`) against the names of a real report
    (claim_evidence.json: its hardware units and counters): an unknown unit (e.g. 'drum') is refuted
    with the nearest real name; a known unit whose counter the bundled report lacks is only
    unverifiable here."""
    ev = evidence()["ncu"]
    bad, unknown = [], []
    for m in facts["metrics"]:
        base = m.split(".")[0]
        unit = base.split("__")[0]
        if unit not in ev["units"]:
            near = difflib.get_close_matches(base, ev["counters"], n=1, cutoff=0.6)
            bad.append(
                f"{m}: Nsight Compute has no unit '{unit}'"
                + (f"; did it mean {near[0]}.sum?" if near else "")
            )
        elif base not in ev["counters"]:
            unknown.append(m)
    if bad:
        return _f("metric_exists", "refuted", "; ".join(bad) + f" ({ev['source']}).")
    if unknown:
        return _f(
            "metric_exists",
            "unverifiable",
            f"{', '.join(unknown)}: not in the bundled report's --set full metrics (the name may "
            "still exist).",
        )
    return _f(
        "metric_exists", "plausible", "every metric named exists in a real Nsight Compute report."
    )


def ptx_operands(facts: dict) -> Finding:
    """A PTX mma instruction as written (`asm`: its text) against the ISA's fragment sizes
    (claim_evidence.json): the shape, the type suffixes, and the number of registers in each operand
    brace."""
    ev = evidence()["ptx_mma"]
    asm = facts["asm"]
    m = re.search(r"(mma\.sync\.aligned\.(m\d+n\d+k\d+)\.row\.col((?:\.[a-z0-9]+)+))", asm)
    if not m:
        return _f("ptx_operands", "unverifiable", "no mma.sync instruction found in the code.")
    shape, types = m.group(2), m.group(3).strip(".").split(".")
    groups = [len([x for x in g.split(",") if x.strip()]) for g in re.findall(r"\{([^}]*)\}", asm)]
    problems = []
    if len(types) != 4:
        problems.append(
            f"'{m.group(1)}' names {len(types)} type(s) where the ISA needs four (D, A, B, C, e.g. "
            ".f16.f16.f16.f16)"
        )
    acc = "f32" if types and types[0] == "f32" else "f16"
    want = ev.get(shape, {}).get(acc)
    if want and len(groups) >= 4:
        for name, got in zip("dabc", groups[:4]):
            if got != want[name]:
                problems.append(
                    f"operand {name.upper()} has {got} register(s), {shape} .{acc} "
                    f"needs {want[name]}"
                )
    if problems:
        return _f(
            "ptx_operands",
            "refuted",
            "the instruction cannot assemble: "
            + "; ".join(problems)
            + f" ({ev['source'].split(':')[0]}).",
            registers=groups,
        )
    return _f(
        "ptx_operands",
        "plausible",
        f"{m.group(1)} with {groups} registers per operand, as the ISA requires.",
    )


def instruction_family(facts: dict) -> Finding:
    """The name the text gives the tensor-core path (`called`) against the instruction family the code issues."""
    ev = evidence()["ptx_mma"]["families"]
    used = next(
        (fam for ins, fam in sorted(ev.items(), key=lambda kv: -len(kv[0])) if ins in facts["asm"]),
        None,
    )
    called = facts["called"].lower()
    if used and called != used:
        return _f(
            "instruction_family",
            "refuted",
            f"the text calls it {facts['called']}, but the code issues "
            f"{next(i for i, f in ev.items() if f == used)} ({used}); WMMA is the separate wmma.* "
            "family behind nvcuda::wmma (PTX ISA).",
        )
    return _f("instruction_family", "plausible", f"{facts['called']}: the family the code issues.")


def host_builtin(facts: dict) -> Finding:
    """`__builtin_prefetch(addr, rw, locality)` (`locality`) said to be a `claimed` prefetch (target
    `level`, instruction `instruction`): it is a host compiler builtin for the CPU's caches (GCC
    manual), and its x86 instruction follows from the locality."""
    ev = evidence()["gcc_prefetch"]
    ins = ev["x86"][str(facts["locality"])]
    problems = []
    if facts.get("target") == "gpu":
        problems.append(
            "it is a host (CPU) builtin; in GPU code the hardware prefetch is not reached this way"
        )
    if facts.get("instruction") and facts["instruction"].lower() != ins:
        problems.append(
            f"locality {facts['locality']} compiles to {ins} on x86, not {facts['instruction']}"
        )
    if facts.get("level") == "L2" and facts["locality"] == 3:
        problems.append("locality 3 keeps the line in all cache levels, it does not select L2")
    if problems:
        return _f(
            "host_builtin",
            "refuted",
            "; ".join(problems) + f" ({ev['source'].split(':')[0]}).",
            x86_instruction=ins,
        )
    return _f("host_builtin", "plausible", f"a CPU prefetch ({ins} on x86).", x86_instruction=ins)


def kernel_code(facts: dict) -> Finding:
    """A kernel as written: identifiers it uses that nothing declares (it cannot compile), and
    whether it is the copy it is presented as (bytes read and written per thread)."""
    problems = []
    undeclared = [n for n in facts.get("uses", ()) if n not in facts.get("declared", ())]
    if undeclared:
        problems.append(
            f"{', '.join(undeclared)} is used but never declared (the kernel cannot compile)"
        )
    r, w = facts.get("read_bytes"), facts.get("write_bytes")
    if facts.get("presented_as") == "copy" and r is not None and r != w:
        problems.append(
            f"it reads {r} B and writes {w} B per thread: not a copy, so a 'memory utilisation' of "
            "it says nothing about coalescing a copy"
        )
    if problems:
        return _f("kernel_code", "refuted", "; ".join(problems) + ".")
    return _f(
        "kernel_code", "plausible", "the kernel compiles as written and is what it is presented as."
    )


def figure_support(facts: dict) -> Finding:
    """A figure with nothing that could check it: no metric, method, data or source named
    (`supported`: False). For a convergence claim (`evaluations`, `space`: the listed values per
    parameter, `space_complete`): a space searched exhaustively in no more evaluations is a vacuous
    claim; an example space leaves it unverifiable."""
    if "evaluations" in facts:
        size = math.prod(len(v) for v in facts["space"])
        if facts.get("space_complete") and facts["evaluations"] >= size:
            return _f(
                "figure_support",
                "plausible",
                f"the space has {size} configurations, so {facts['evaluations']} evaluations "
                "include an exhaustive search: true, and says nothing about the optimiser.",
                space_size=size,
            )
        return _f(
            "figure_support",
            "unverifiable",
            f"'≤ {facts['evaluations']} evaluations to reach {facts['target']} %' of an optimum: "
            f"the text gives no objective, no runs and only an example space ({size} "
            "configurations as listed, so the real space is larger or unknown).",
            space_size=size,
        )
    if not facts.get("supported", False):
        return _f(
            "figure_support",
            "unverifiable",
            f"{facts['figure']}: no metric, method, data or source is named, so nothing here can "
            "check it.",
        )
    return _f("figure_support", "plausible", f"{facts['figure']}: its source is named.")


def citation(facts: dict) -> Finding:
    """A statement about a project (`subject`: a key of claim_evidence.json's citations) against its
    source: the claimed value (`claimed`) must match the cited one (`true`-ly: case-insensitive
    containment)."""
    ev = evidence()["citations"][facts["subject"]]
    claimed, real = facts["claimed"], ev["value"]
    ok = claimed.lower() in real.lower() or real.lower() in claimed.lower()
    if not ok:
        return _f(
            "citation",
            "refuted",
            f"the text says {claimed}; the source says {real} ({ev['source']}).",
        )
    return _f("citation", "plausible", f"{claimed}, as the source says ({ev['source']}).")


CHECKS = {
    f.__name__: f
    for f in (
        rate_vs_peak,
        fraction_vs_anchor,
        gemm_traffic,
        arithmetic,
        same_quantity,
        registry_fact,
        spec_bandwidth,
        occupancy_helper,
        bank_rule,
        request_units,
        api_exists,
        metric_exists,
        ptx_operands,
        instruction_family,
        host_builtin,
        kernel_code,
        figure_support,
        citation,
    )
}


def worst(findings: list[Finding]) -> str:
    return min((f.verdict for f in findings), key=SEVERITY.index) if findings else "unverifiable"
