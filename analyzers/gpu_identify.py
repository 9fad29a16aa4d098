"""Which GPU a file was recorded on, from whatever the file has, with the evidence said in one line.

    ident = identify_gpu(Evidence(name=..., attributes=..., cc=(7, 5), sm_count=40), override=None)
    ident.spec        the GPUSpec the analyses use
    ident.how         how it was identified ("named by the file (device attributes): NVIDIA A10G", ...)
    ident.warning     None, or what the user should know (an inference, an ambiguity, a conflict with --gpu)

More: docs/architecture.md, *analyzers.gpu_identify*.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from analyzers.errors import UnknownName
from analyzers.gpus import (
    CC_LIMITS,
    REGISTRY,
    GPUSpec,
    _strip_prefix,
    find_gpu,
    from_device_attributes,
    get_gpu,
    resolve_gpu,
)

#: total memory as a device reports it vs the datasheet's decimal GB: devices report usable bytes (a
#: "32 GB" V100 34,084,028,416, a "141 GB" H200 150,109,880,320, a "16 GB" T4 with ECC
#: 15,828,320,256); parts that share a CC and an SM count differ in memory by far more (16 / 32 GB,
#: 80 / 141 GB)
MEMORY_TOLERANCE = 0.15
CLOCK_TOLERANCE = 0.03


@dataclass(frozen=True)
class Evidence:
    """What a file says about its GPU (all optional)."""

    name: str | None = None
    name_source: str | None = None  # where the name comes from, said in `how`
    attributes: dict = field(default_factory=dict)  # ncu device__attribute_* (prefix optional)
    cc: tuple[int, int] | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    memory_clock_hz: float | None = None


@dataclass(frozen=True)
class Identified:
    spec: GPUSpec
    how: str
    inferred: bool = False
    warning: str | None = None
    candidates: tuple[str, ...] = ()


def _cc_text(cc) -> str:
    return f"{cc[0]}.{cc[1]}"


def _facts(ev: Evidence) -> tuple[tuple[int, int] | None, int | None, int | None]:
    """(cc, sm_count, memory_bytes) from the evidence, the attributes filling what is not given directly."""
    a = _strip_prefix(ev.attributes or {})
    cc = ev.cc
    if cc is None:
        try:
            major, minor = a.get("compute_capability_major"), a.get("compute_capability_minor")
            cc = (
                (int(float(major)), int(float(minor)))
                if major is not None and minor is not None
                else None
            )
        except (TypeError, ValueError):
            cc = None
    sm = ev.sm_count
    if sm is None and a.get("multiprocessor_count") is not None:
        try:
            sm = int(float(str(a["multiprocessor_count"]).replace(",", "")))
        except ValueError:
            sm = None
    return cc, sm, ev.memory_bytes


def candidates(ev: Evidence) -> list[GPUSpec]:
    """Registry entries consistent with every fact the evidence gives (none given: none)."""
    cc, sm, mem = _facts(ev)
    if cc is None and sm is None:
        return []
    out = []
    for g in REGISTRY:
        if cc is not None and g.cc != cc:
            continue
        if sm is not None and g.sm_count != sm:
            continue
        if mem and g.memory_bytes and abs(mem / g.memory_bytes - 1) > MEMORY_TOLERANCE:
            continue
        if ev.memory_clock_hz and g.memory_clock_hz and not _clock_fits(ev.memory_clock_hz, g):
            continue
        out.append(g)
    # a measured memory clock that matches an entry's beats entries that list no clock
    if ev.memory_clock_hz and any(g.memory_clock_hz for g in out):
        out = [g for g in out if g.memory_clock_hz]
    return out


def _clock_fits(hz: float, g: GPUSpec) -> bool:
    return abs(hz / g.memory_clock_hz - 1) <= CLOCK_TOLERANCE


def _facts_text(ev: Evidence) -> str:
    cc, sm, mem = _facts(ev)
    parts = []
    if cc:
        parts.append(f"CC {_cc_text(cc)}")
    if sm:
        parts.append(f"{sm} SMs")
    if mem:
        parts.append(f"{mem / 1e9:.0f} GB")
    if ev.memory_clock_hz:
        parts.append(f"DRAM clock {ev.memory_clock_hz / 1e9:.2f} GHz")
    return ", ".join(parts) or "nothing"


def _from_cc_table(ev: Evidence) -> GPUSpec | None:
    cc, sm, mem = _facts(ev)
    if cc is None or cc not in CC_LIMITS:
        return None
    attrs = dict(_strip_prefix(ev.attributes or {}))
    attrs.update({"compute_capability_major": cc[0], "compute_capability_minor": cc[1]})
    if sm is not None:
        attrs["multiprocessor_count"] = sm
    if mem is not None:
        attrs.setdefault("total_memory", mem)
    attrs.pop("display_name", None)
    spec = from_device_attributes(attrs)
    name = f"unknown GPU (CC {_cc_text(cc)}" + (f", {sm} SMs)" if sm else ")")
    src = dict(spec.sources)
    src["name"] = "not named by the file; per-SM limits from the per-CC table"
    return replace(spec, name=name, sources=src)


def identify_gpu(ev: Evidence, override: str | None = None) -> Identified:
    """The GPU of a file (see the module docstring). Raises UnknownName when nothing identifies it,
    or when `override` is not a registry name."""
    attrs = ev.attributes or {}
    cc, sm, _ = _facts(ev)
    said = f"{ev.name} ({ev.name_source})" if ev.name else "no GPU"
    if override:
        entry = get_gpu(override)
        spec = resolve_gpu(entry.name, attrs) if attrs else entry
        warning = None
        if cc is not None and cc != entry.cc:
            warning = (
                f"--gpu {entry.name} has CC {_cc_text(entry.cc)} but the file says CC "
                f"{_cc_text(cc)}: the file's device attributes are used where it has them, the "
                "datasheet otherwise"
            )
        return Identified(
            spec, f"{spec.name}: given with --gpu (the file names {said})", warning=warning
        )
    if ev.name and find_gpu(ev.name):
        return Identified(
            resolve_gpu(ev.name, attrs), f"{find_gpu(ev.name).name}: named by the file ({said})"
        )
    if ev.name and attrs:
        dev = from_device_attributes(attrs)
        if dev.cc is not None or dev.sm_count is not None:
            return Identified(
                dev,
                f"{dev.name}: named by the file ({ev.name_source}), not in the registry; described "
                "from the file's device attributes (no datasheet peaks)",
            )
    if ev.name:
        # a name the registry does not know and no attributes: the facts may still describe it
        spec = _from_cc_table(ev)
        if spec is not None:
            spec = replace(spec, name=ev.name)
            return Identified(
                spec,
                f"{ev.name}: named by the file ({ev.name_source}), not in the registry; per-SM "
                f"limits from the CC {_cc_text(cc)} table (no datasheet peaks)",
            )
        raise UnknownName(
            "GPU",
            ev.name,
            "not in the registry and the file gives no compute capability; give --gpu NAME "
            "(`kernelscope gpus` lists them)",
        )
    fits = candidates(ev)
    facts = _facts_text(ev)
    if len(fits) == 1 and sm is not None:  # a compute capability alone is shared by too many parts
        g = fits[0]
        spec = resolve_gpu(g.name, attrs) if attrs else g
        return Identified(
            spec,
            f"{g.name}: inferred, the only registry GPU with {facts} (the file names no GPU)",
            inferred=True,
            candidates=(g.name,),
            warning=f"GPU inferred from {facts}: {g.name} is the only registry GPU "
            "that fits; give --gpu NAME if it was another",
        )
    spec = _from_cc_table(ev)
    if spec is None:
        raise UnknownName(
            "GPU",
            None,
            message="no GPU identified: the file names no GPU and gives "
            "no compute capability; give --gpu NAME (`kernelscope gpus` lists them)",
        )
    names = tuple(g.name for g in fits)
    fit = (
        f"fits {' and '.join(names)}"
        if len(names) > 1
        else f"alone does not identify a GPU (registry GPUs with it: {names[0]})"
        if names
        else "fits no registry GPU"
    )
    return Identified(
        spec,
        f"{spec.name}: not identified, {facts} {fit} (the file names no GPU)",
        candidates=names,
        warning=f"GPU not identified: {facts} {fit}; give --gpu NAME for the "
        "datasheet peaks (DRAM bandwidth, FLOP/s); per-SM limits come from the CC table",
    )
