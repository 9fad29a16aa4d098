"""Nsight Compute ingestion: `.ncu-rep` (through NVIDIA's `ncu-report` wheel) and CSV exports.

More: docs/architecture.md, *collectors.ncu*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from importlib import resources

import polars as pl

from collectors.errors import COUNTER_PERMISSION, ArtifactError, counters_forbidden
from collectors.kernel_names import canonical_name, display_names

# the sandbox's task, in a polars-free module
from collectors.ncu_rep import read_report_file  # noqa: F401
from collectors.ncu_values import (
    _NA,
    FACT_METRICS,
    IDENTITY,
    RAW_BATCH_BYTES,
    _detect_decimal_comma,  # noqa: F401
    _number,
    _parse_raw,
    ncu_to_base,
)
from collectors.schema import (
    KERNEL_SCHEMA,
    METRIC_SECTION_SCHEMA,
    NCU_ALTERNATE_METRICS,
    NCU_METRIC_COLUMNS,
    SASS_SCHEMA,
    SOURCE_FILES_SCHEMA,
    SOURCE_METRIC_SCHEMA,
    Parsed,
    conform_metrics,
    finish_meta,
)

#: report files: `.ncu-rep`, and `.nsight-cuprof-report` as Nsight Compute named them until 2020.1
REPORT_SUFFIXES = (".ncu-rep", ".nsight-cuprof-report")
# ---------------------------------------------------------------------------------------------
# CSV


def _read_csv_rows(text: str, name: str) -> list[list[str]]:
    # ncu writes no embedded newlines in fields; skip ==PROF== noise and application output lines
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise ArtifactError(name, f"malformed CSV ({e})") from None
    return rows


_label_map: dict[tuple[str, str, str], str] | None = None


def _labels() -> dict[tuple[str, str, str], str]:
    """(section, body item label, metric label) -> metric name, for details pages exported with
    labels. Derived from the real H200 export pair (labels vs `--print-metric-name name`) by
    tools/make_ncu_labels.py."""
    global _label_map
    if _label_map is None:
        raw = json.loads(resources.files("collectors").joinpath("ncu_labels.json").read_text())
        _label_map = {tuple(k.split("\x1f")): v for k, v in raw.items()}
    return _label_map


#: section names of older details pages -> the current one (the labels inside are the same)
_OLD_SECTIONS = {"GPU Speed Of Light": "GPU Speed Of Light Throughput"}
#: labels of ncu 2019.5-2021.1 details pages that later versions renamed (section, label) -> metric;
#: the same counters the current labels map to (formats.md §1.3: "SOL FB" is the frame-buffer = DRAM
#: throughput)
_OLD_LABELS = {
    ("GPU Speed Of Light", "Memory Frequency"): "dram__cycles_elapsed.avg.per_second",
    ("GPU Speed Of Light", "SOL FB"): "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ("GPU Speed Of Light", "SM [%]"): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    (
        "GPU Speed Of Light",
        "Memory [%]",
    ): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
}


def _metric_of_label(sec: str, body: str, label: str) -> str:
    labels = _labels()
    return (
        labels.get((sec, body, label))
        or _OLD_LABELS.get((sec, label))
        or labels.get((_OLD_SECTIONS.get(sec, sec), body, label))
        or labels.get(("", "", label))
        or f"label:{sec}/{label}"
    )


_section_map: dict[str, str] | None = None


def metric_sections() -> dict[str, str]:
    """metric name -> the Nsight Compute section that shows it (from the same label table), for
    exports that do not name sections (the raw page)."""
    global _section_map
    if _section_map is None:
        out: dict[str, str] = {}
        for (sec, _body, _label), metric in sorted(_labels().items()):
            if sec:
                out.setdefault(metric, sec)
        _section_map = out
    return _section_map


_metric_label_map: dict[str, str] | None = None


def metric_labels() -> dict[str, str]:
    """metric name -> the label Nsight Compute's own sections show it with (e.g.
    sm__inst_executed.avg.per_cycle_active -> "Executed Ipc Active"), from the same label table;
    metrics no section shows have none."""
    global _metric_label_map
    if _metric_label_map is None:
        out: dict[str, str] = {}
        for (sec, _body, label), metric in sorted(_labels().items()):
            if sec and label:
                out.setdefault(metric, label)
        _metric_label_map = out
    return _metric_label_map


def _parse_details(rows: list[list[str]], h: int, name: str) -> list[tuple[dict, dict]]:
    header = rows[h]
    idx = {c: i for i, c in enumerate(header)}
    for need in ("Metric Name", "Metric Unit", "Metric Value"):
        if need not in idx:
            raise ArtifactError(name, f'details-page CSV without a "{need}" column')
    sec_i = idx.get("Section Name")
    body_i = idx.get("Body Item Label")
    launches: dict[str, tuple[dict, dict]] = {}
    width = idx["Metric Value"] + 1  # rows without rule text stop after "Metric Value"
    values = [r[idx["Metric Value"]] for r in rows[h + 1 : h + 200] if len(r) >= width]
    dc = _detect_decimal_comma(values)
    n_ok = 0
    for n, r in enumerate(rows[h + 1 :]):
        if len(r) < width:
            continue  # embedded sub-tables (NUMA affinity) and rule text lines are narrower
        if not r[0].strip().isdigit():
            continue
        n_ok += 1
        key = r[0]
        if key not in launches:
            launches[key] = (
                dict(zip(IDENTITY, [r[idx[c]] if c in idx else "" for c in IDENTITY])),
                {},
            )
        metrics = launches[key][1]
        mname = r[idx["Metric Name"]]
        if "__" not in mname:  # a label: map it to the metric name
            sec = r[sec_i] if sec_i is not None else ""
            body = r[body_i] if body_i is not None else ""
            mname = _metric_of_label(sec, body, mname)
        if mname in metrics:
            continue  # the same metric shown again in another section
        unit = r[idx["Metric Unit"]]
        val = r[idx["Metric Value"]]
        num = _number(val, dc)
        section = (r[sec_i].strip() or None) if sec_i is not None else None
        if num is None:
            metrics[mname] = (None, None if val.strip() in _NA else val, unit, section)
        else:
            v, u = ncu_to_base(num, unit)
            metrics[mname] = (v, None, u, section)
    if not n_ok:
        raise ArtifactError(name, "details-page CSV has no metric rows")
    # the NUMA Affinity section embeds a small table with the GPU's name
    for a, b in zip(rows[h + 1 :], rows[h + 2 :]):
        if a[:2] == ["GPU ID", "GPU Name"] and len(b) >= 2:
            for ident, _ in launches.values():
                ident["GPU Name"] = b[1]
                ident["GPU Name Source"] = "NUMA Affinity section"
            break
    # complete truncated trailing rows are detected by the row-width check; a launch with no
    # duration means the file ended inside it
    return list(launches.values())


_HEAD_BYTES = 8 << 20


def _parse_csv(data: bytes, name: str, rest=None, keep=None):
    """The header is found in the decoded head of the file; a details page is decoded whole, a raw
    page's kernel rows are read from the bytes in batches (`_parse_raw`). rest: an iterator over the
    file's bytes after `data` (a file read as a stream, `parse_file`), None when data is the whole
    file. keep: the metrics of a raw page to read (`_parse_raw`), None for all; a details page is
    read whole."""
    import codecs
    import itertools

    bom = 3 if data.startswith(codecs.BOM_UTF8) else 0
    try:
        whole = rest is None and len(data) <= _HEAD_BYTES
        text = (
            data.decode("utf-8-sig")
            if whole
            else codecs.getincrementaldecoder("utf-8-sig")().decode(data[:_HEAD_BYTES], final=False)
        )
    except UnicodeDecodeError:
        raise ArtifactError(name, "not an Nsight Compute CSV export (not UTF-8 text)") from None
    if "\x00" in text[:65536]:
        raise ArtifactError(name, "not an Nsight Compute CSV export (binary data)")
    if counters_forbidden(text[: 1 << 20]):
        raise ArtifactError(name, COUNTER_PERMISSION)
    # find the header line: the first whose fields include "ID" and "Kernel Name" (skips ==PROF==
    # noise)
    pos, header = 0, None
    for _ in range(5000):
        nl = text.find("\n", pos)
        line = text[pos : nl if nl >= 0 else len(text)]
        if len(line) > 1 << 20:
            raise ArtifactError(
                name, "not an Nsight Compute CSV export (a line of over 1 MiB before any header)"
            )
        if '"Kernel Name"' in line or "Kernel Name" in line:
            try:
                fields = next(csv.reader([line]))
            except (csv.Error, StopIteration):
                fields = []
            if "ID" in fields and "Kernel Name" in fields:
                header = fields
                pos = nl + 1 if nl >= 0 else len(text)
                break
        if nl < 0:
            break
        pos = nl + 1
    if header is None:
        raise ArtifactError(
            name, 'not an Nsight Compute CSV export (no header row with "ID" and "Kernel Name")'
        )
    if "Metric Name" in header and "Metric Value" in header:
        if rest is not None:
            data = b"".join([data, *rest])
        if not whole:
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise ArtifactError(
                    name, "not an Nsight Compute CSV export (not UTF-8 text)"
                ) from None
        rows = _read_csv_rows(text[pos:], name)
        return (
            *_long_from_launches(_parse_details([header] + rows, 0, name)),
            None,
            [],
        ), "csv-details"
    nl = text.find("\n", pos)
    units_line = text[pos : nl if nl >= 0 else len(text)]
    if not units_line.strip():
        raise ArtifactError(name, "raw-page CSV has a header but no units row and no kernels")
    units = next(csv.reader([units_line]))
    body_start = bom + len(text[: nl + 1 if nl >= 0 else len(text)].encode("utf-8"))
    if rest is not None:
        idents, long, names = _parse_raw(
            itertools.chain([memoryview(data)[body_start:]], rest), header, units, 0, name, keep
        )
    else:
        idents, long, names = _parse_raw(data, header, units, body_start, name, keep)
    return (idents, long, None, names, units), "csv-raw"


def _long_from_launches(launches: list[tuple[dict, dict]]):
    """(identity, {metric: (value, text, unit[, section])}) per launch -> (identities, long metric
    frame, the section of each metric: the first one a launch names)."""
    idents, rows, sections = [], [], {}
    for ident, metrics in launches:
        idents.append(ident)
        kid = _int(ident["ID"])
        for m, (v, text, unit, *sec) in metrics.items():
            rows.append({"id": kid, "metric": m, "value": v, "text": text, "unit": unit})
            if sec and sec[0]:
                sections.setdefault(m, sec[0])
    return (
        idents,
        pl.DataFrame(
            rows,
            schema={
                "id": pl.Int32,
                "metric": pl.String,
                "value": pl.Float64,
                "text": pl.String,
                "unit": pl.String,
            },
        ),
        sections,
    )


# ---------------------------------------------------------------------------------------------
# .ncu-rep


def check_report_container(data: bytes, name: str) -> int | None:
    """Reject what is not an intact .ncu-rep before handing it to NVIDIA's library (which loads
    random or truncated bytes without complaint): the block framing, headers paired with their
    payloads, a report cut after its first kernel (collectors.ncu_container). Returns the number of
    kernel results (None: another layout)."""
    from collectors.ncu_container import walk

    return walk(data, name)


def _parse_report(data: bytes, name: str) -> tuple[list[tuple[dict, dict]], dict[str, str], dict]:
    """Check the container here, then read it with NVIDIA's library in a child process
    (collectors.sandbox): a report that makes the library abort or run away costs one refusal, never
    this process."""
    from collectors.sandbox import run_reader

    blocks = check_report_container(data, name)
    try:
        import ncu_report  # noqa: F401  NVIDIA's wheel `ncu-report`: pip install 'kernelscope[ncu]'
    except ImportError:
        raise ArtifactError(
            name,
            "reading .ncu-rep needs NVIDIA's ncu-report wheel: pip install 'kernelscope[ncu]' (or "
            "export a CSV: ncu --import FILE --page raw --csv > FILE.csv)",
        ) from None
    res = run_reader("ncu-rep", data, name, ".ncu-rep")
    out = res.get("launches") if isinstance(res, dict) else None
    if (
        not isinstance(out, list)
        or not all(
            isinstance(x, list)
            and len(x) == 2
            and isinstance(x[0], dict)
            and isinstance(x[1], dict)
            for x in out
        )
        or not isinstance(res.get("sections"), dict)
        or not isinstance(res.get("source"), dict)
    ):
        raise ArtifactError(name, "the report reader returned an unexpected result")
    if blocks is not None and len(out) != blocks:
        raise ArtifactError(
            name,
            f"the report holds {blocks} kernel result blocks but {len(out)} could be read (corrupt "
            "report)",
        )
    return [(ident, metrics) for ident, metrics in out], res["sections"], res["source"]


# ---------------------------------------------------------------------------------------------
# tables


def _int(s: str) -> int | None:
    s = (s or "").strip().replace(",", "")
    # -?\d+ (\d: any decimal digit)
    return int(s) if (s[1:] if s[:1] == "-" else s).isdecimal() else None


_DIGITS = re.compile(r"\d+")


def _dims(s: str) -> tuple[int | None, int | None, int | None]:
    nums = _DIGITS.findall(s or "")
    if len(nums) != 3:
        return None, None, None
    return int(nums[0]), int(nums[1]), int(nums[2])


def short_name(name: str) -> str:
    """`void foo::bar<128>(float*, int)` -> `bar`; `ks_copy_u4` -> `ks_copy_u4` (the bare function
    name; the kernel table's short_name column is collectors.kernel_names.display_names, which keeps
    template arguments where two kernels of a run share the function name)."""
    s = name
    depth, cut = 0, len(s)
    # cut at the first '(' or '<' outside of nothing: function args / templates
    for i, ch in enumerate(s):
        if ch in "(<" and depth == 0:
            cut = i
            break
    s = s[:cut].strip()
    s = s.split(" ")[-1]
    return s.split("::")[-1] or name


def source_text(data: bytes, name: str, launch_id: int) -> pl.DataFrame:
    """The SASS text and source line of every address of one launch of an .ncu-rep (uncompressed bytes), read in
    the sandbox's child process: what ingest leaves out of the stored `sass` table (the per-address reads are
    most of a report's reading time)."""
    from collectors.sandbox import run_reader

    res = run_reader("ncu-rep-source", data, name, ".ncu-rep", (str(int(launch_id)),))
    rows = res.get("sass") if isinstance(res, dict) else None
    if not isinstance(rows, list):
        raise ArtifactError(name, "the report reader returned no source for this launch")
    return pl.DataFrame(rows, schema=SASS_SCHEMA)


def with_source_text(sass: pl.DataFrame, data: bytes, name: str, launch_id: int) -> pl.DataFrame:
    """A run's `sass` table with one launch's rows read again with their SASS text and source lines."""
    return pl.concat([sass.filter(pl.col("id") != launch_id), source_text(data, name, launch_id)])


def _source_frames(source: dict | None) -> dict[str, pl.DataFrame]:
    """The source-level tables (empty for CSV exports, which carry none)."""
    source = source or {}
    sass = pl.DataFrame(source.get("sass") or [], schema=SASS_SCHEMA)
    sm = pl.DataFrame(source.get("metrics") or [], schema=SOURCE_METRIC_SCHEMA, orient="row")
    files = pl.DataFrame(
        {
            "file": list((source.get("files") or {}).keys()),
            "content": list((source.get("files") or {}).values()),
        },
        schema=SOURCE_FILES_SCHEMA,
    )
    return {"sass": sass, "source_metrics": sm, "source_files": files}


def _section_frame(
    long: pl.DataFrame, sections: dict[str, str] | None, names: list[str] | None = None
) -> pl.DataFrame:
    """The section of each metric the run has: the file's own (a report's sections, a details page's
    Section Name), else the section whose label names it in ncu's label table (the raw page names
    none). names: the run's metric names where the reader knows them (a raw page's header), else
    they are read from `long`."""
    if names is None:
        # unique first: 22 M rows
        names = long.get_column("metric").unique().cast(pl.String).to_list()
    labelled = metric_sections()
    own = sections or {}
    rows = [(m, own.get(m) or labelled.get(m)) for m in names]
    rows = [r for r in rows if r[1]]
    return pl.DataFrame(rows, schema=METRIC_SECTION_SCHEMA, orient="row").sort("metric")


def _build(
    idents: list[dict],
    long: pl.DataFrame,
    name: str,
    fmt: str,
    source_level: dict | None = None,
    sections: dict[str, str] | None = None,
    names: list[str] | None = None,
    units: list[str] | None = None,
) -> Parsed:
    long = conform_metrics(long)
    wanted = {m for m in NCU_METRIC_COLUMNS.values()} | {
        m for alts in NCU_ALTERNATE_METRICS.values() for m in alts
    }
    sel = long.filter(pl.col("metric").is_in(list(wanted)) & pl.col("value").is_not_null()).select(
        "id", "metric", "value"
    )
    # one column per metric; a metric a launch repeats: its last value (pivoting the categorical
    # names: 6x faster than making them strings first)
    per_launch = (
        sel.pivot(on="metric", index="id", values="value", aggregate_function="last")
        if sel.height
        else pl.DataFrame({"id": []}, schema={"id": pl.Int32})
    )
    sizes = {
        (i, m): v
        for i, m, v in sel.filter(
            pl.col("metric").is_in(["launch__grid_size", "launch__block_size"])
        ).iter_rows()
    }  # for _contradiction
    raw_names = [ident["Kernel Name"] for ident in idents]
    shown = display_names(raw_names)
    krows, contradicted = [], []
    for ident, label in zip(idents, shown):
        kid = _int(ident["ID"])
        raw = ident["Kernel Name"]
        kname = canonical_name(raw)
        bx, by, bz = _dims(ident["Block Size"])
        gx, gy, gz = _dims(ident["Grid Size"])
        bad = _contradiction(kid, ident, (gx, gy, gz), (bx, by, bz), sizes)
        # dimensions the launch's own size metrics disprove are not kept (see _contradiction)
        if bad:
            contradicted.append(bad)
            bx = by = bz = gx = gy = gz = None
        krows.append(
            {
                "id": kid,
                "kernel_name": kname,
                "raw_name": raw,
                "short_name": label,
                "kernel_key": hashlib.sha1(
                    f"{kname}|{(bx, by, bz)}|{(gx, gy, gz)}".encode()
                ).hexdigest()[:12],
                "process_id": _int(ident["Process ID"]),
                "process_name": ident["Process Name"] or None,
                "device": _int(ident["Device"]),
                "context": _int(ident["Context"]),
                "stream": _int(ident["Stream"]),
                "cc": ident["CC"] or None,
                "nvtx_range": ident.get("NVTX") or None,
                "block_x": bx,
                "block_y": by,
                "block_z": bz,
                "grid_x": gx,
                "grid_y": gy,
                "grid_z": gz,
            }
        )
    ident_schema = {c: t for c, t in KERNEL_SCHEMA.items() if c not in NCU_METRIC_COLUMNS}
    kernels = pl.DataFrame(krows, schema=ident_schema).join(
        per_launch.with_columns(pl.col("id").cast(pl.Int64)),
        on="id",
        how="left",
        maintain_order="left",
    )
    have = set(kernels.columns)
    kernels = kernels.select(
        *ident_schema,
        *[  # each column: its metric, else the older name of it
            pl.coalesce(
                [
                    pl.col(m)
                    for m in (metric, *NCU_ALTERNATE_METRICS.get(metric, ()))
                    if m and m in have
                ]
                or [pl.lit(None)]
            )
            .cast(pl.Float64)
            .alias(col)
            for col, metric in NCU_METRIC_COLUMNS.items()
        ],
    ).select(list(KERNEL_SCHEMA))
    kernels = kernels.cast(dict(KERNEL_SCHEMA))
    if kernels.height == 0 or kernels["duration_ns"].null_count() == kernels.height:
        raise ArtifactError(
            name,
            "no kernel has a duration (gpu__time_duration.sum, or 'Duration' in the Speed Of Light "
            "section): not an Nsight Compute export of kernel launches, a truncated one, or an "
            "incomplete collection",
        )
    first = kernels["id"][0]
    attrs_rows = (
        long.filter(pl.col("id") == first)
        .with_columns(pl.col("metric", "text").cast(pl.String))
        .filter(pl.col("metric").str.starts_with("device__attribute_"))
    )
    attrs = {}
    for m, v, text in attrs_rows.select("metric", "value", "text").iter_rows():
        attrs[m[len("device__attribute_") :]] = (
            text if v is None else (int(v) if float(v).is_integer() else v)
        )
    gpu_name = attrs.get("display_name") or idents[0].get("GPU Name")
    source = (
        "device attributes"
        if attrs.get("display_name")
        else idents[0].get("GPU Name Source")
        if gpu_name
        else None
    )
    kids = [r["id"] for r in krows]
    if names is not None and kids and all(k is not None and 0 <= k < 1 << 31 for k in kids):
        # a raw page: each row has every metric of the header
        from collections import Counter

        metric_count = len(names) * max(Counter(kids).values())
    else:
        metric_count = _most_per_launch(long["id"])
    meta = {
        "source_format": fmt,
        "gpu_name": gpu_name,
        "gpu_name_source": source,
        "cc": kernels["cc"][0],
        "device_attributes": attrs,
        "kernel_count": kernels.height,
        "item_count": kernels.height,
        "metric_count": metric_count,
    }
    meta.update(_gpu_facts(long, attrs))
    warnings = []
    if contradicted:
        warnings.append(
            f"{len(contradicted)} of {kernels.height} launches have grid/block dimensions that "
            f"contradict their own size metrics ({contradicted[0]}): those dimensions are not "
            "used; the launches are told apart by blocks per grid and threads per block (seen in "
            "ncu 2025.3 exports of an ncu 2019.x-2020.1 report)"
        )
    failed = kernels.filter(pl.col("duration_ns").is_null())["id"].to_list()
    if failed:
        ids = ", ".join(str(i) for i in failed[:10]) + (", …" if len(failed) > 10 else "")
        warnings.append(
            f"{len(failed)} of {kernels.height} launches have no duration: Nsight Compute did not "
            "collect them (its collection failed or was cut off) — "
            f"launch{'es' if len(failed) > 1 else ''} {ids}; they are listed with that reason and "
            "left out of every sum"
        )
    if warnings:
        meta["warnings"] = warnings
    meta["failed_launches"] = failed
    meta["lacks"] = _lacks(kernels, meta, bool(contradicted))
    meta["precision"] = source_precision(fmt, units or [])
    src = _source_frames(source_level)
    meta["source_counters"] = src["source_metrics"].height > 0
    meta["source_lines"] = (
        bool(src["sass"]["line"].is_not_null().any()) if src["sass"].height else False
    )
    return Parsed(
        "ncu",
        {
            "kernels": kernels,
            "metrics": long,
            "metric_sections": _section_frame(long, sections, names),
            **src,
        },
        finish_meta("ncu", meta),
    )


#: a unit with an SI prefix: a CSV exported with ncu's automatic units (its default); `--print-units
#: base` writes nsecond, byte, cycle, inst ...
_PREFIXED_UNIT = re.compile(
    r"^(?:[KMGT](?:byte|cycle|inst|warp|sector|request|wavefront|thread|block)|[um]second|"
    r"[KMGT]?byte/[um]?second|cycle/[um]second)"
)
#: the export that keeps every value as ncu measured it
EXACT_EXPORTS = (
    ".ncu-rep (the report itself), or the raw page exported with ncu's automatic units (`ncu "
    "--import REPORT --page raw --csv`)"
)


def source_precision(fmt: str, units: list[str]) -> dict:
    """How exact the numbers of an ncu export are (issue 39): {"exact", "rounded" (the quantities a
    rounded source changes and by how much), "note" (one line naming the exact export)}. Measured on
    the project's H200 report and its exports (sample_traces/h200/chapter5_kernels): a raw page in
    base units prints ncu's per-cycle rate metrics (`…per_cycle_elapsed`, behind FP32 FLOP) with two
    decimals, 0.19 where the automatic-unit export has 0.186253, so FP32 FLOP and FLOP/s are up to
    2.0 % off; a details page gives three significant digits, so durations and DRAM bytes are up to
    0.22 % off (at most 0.5 % for three digits)."""
    if fmt == "ncu-rep":
        return {"exact": True, "rounded": [], "note": None}
    if fmt == "csv-details":
        return {
            "exact": False,
            "rounded": [
                "every value: three significant digits (durations, bytes and rates up to 0.5 % "
                "off; 0.22 % on our H200 samples)"
            ],
            "note": "A details-page CSV carries three significant digits: durations, DRAM "
            f"bytes and rates are up to 0.5 % off. Exact: {EXACT_EXPORTS}.",
        }
    base = not any(_PREFIXED_UNIT.match(u or "") for u in units)
    if fmt == "csv-raw" and base:
        return {
            "exact": False,
            "rounded": [
                "FP32 FLOP and FLOP/s: ncu prints the per-cycle FP32 instruction rates with two "
                "decimals in base units (up to 2.0 % off)"
            ],
            "note": "This raw-page CSV was exported with `--print-units base`, where ncu "
            "prints its per-cycle rates with two decimals: FP32 FLOP and FLOP/s are up to 2 % off. "
            "Exact: " + EXACT_EXPORTS + ".",
        }
    return {"exact": True, "rounded": [], "note": None}


def _most_per_launch(ids: pl.Series) -> int:
    """The largest number of metric rows of one launch (ids are launch IDs; nulls are not counted).
    One hash count over the column: as fast as numpy's bincount chunk by chunk on 22 million rows
    (0.25 against 0.22 s), without importing numpy (0.12-0.17 s of every command on a 2-vCPU host)."""
    if ids.null_count():
        ids = ids.drop_nulls()
    return int(ids.value_counts()["count"].max()) if ids.len() else 0


def _median(long: pl.DataFrame, metric: str) -> float | None:
    v = long.filter((pl.col("metric") == metric) & pl.col("value").is_not_null())["value"]
    return float(v.median()) if v.len() else None


def _gpu_facts(long: pl.DataFrame, attrs: dict) -> dict:
    """What identifies the GPU beside its name: SM count (device attribute, else the details page's
    "# SMs") and memory clock (device attribute memory_clock_rate [kHz], else the measured DRAM
    frequency)."""
    sm = attrs.get("multiprocessor_count")
    if not isinstance(sm, (int, float)):
        sm = _median(long, FACT_METRICS[0])
    clock = attrs.get("memory_clock_rate")
    clock = clock * 1e3 if isinstance(clock, (int, float)) else _median(long, FACT_METRICS[1])
    return {"sm_count": int(sm) if sm is not None else None, "memory_clock_hz": clock}


def _contradiction(kid, ident: dict, grid: tuple, block: tuple, values: dict) -> str | None:
    """Why a launch's grid and block dimensions cannot be right, or None: their product differs from
    the launch's own launch__grid_size (blocks per grid) or launch__block_size (threads per block).
    Seen in ncu 2025.3's CSV exports of a 2019.x-2020.1 report, whose Grid Size column repeats the
    block's dimensions (grid (128, 1, 1) for a launch of 1 block of 128 threads: launch__grid_size
    1, launch__thread_count 128)."""
    for what, dims, metric, unit in (
        ("grid", grid, "launch__grid_size", "blocks"),
        ("block", block, "launch__block_size", "threads"),
    ):
        size = values.get((kid, metric))
        if None not in dims and size is not None and abs(dims[0] * dims[1] * dims[2] - size) > 0.5:
            return (
                f"e.g. launch {kid}: {what} ({dims[0]}, {dims[1]}, {dims[2]}) but {metric} = "
                f"{size:g} {unit}"
            )
    return None


def _lacks(kernels: pl.DataFrame, meta: dict, contradicted: bool = False) -> list[str]:
    """What this export does not provide that Kernelscope would use, each with its consequence."""
    out = []
    fmt = meta["source_format"]
    if not meta.get("gpu_name"):
        how = (
            "a details page names it only in the NUMA Affinity section: export with "
            "--print-details all, or the raw page (--page raw), or give --gpu NAME"
            if fmt == "csv-details"
            else "give --gpu NAME"
        )
        out.append(f"the GPU's name: {how}")
    if not meta.get("device_attributes"):
        out.append(
            "device attributes (the device__attribute_ metrics: only a .ncu-rep and the raw page "
            "have them): per-SM limits come from the registry or the per-CC table"
        )
    if meta.get("cc") is None:
        out.append(
            "the compute capability (CC column, absent before ncu 2020.x): the GPU cannot "
            "be inferred"
        )
    if kernels["block_x"].null_count() == kernels.height and not contradicted:
        out.append(
            "the grid and block dimensions (launch__grid_dim_* / launch__block_dim_* metrics, or "
            "the Block Size and Grid Size columns): launches of one kernel with different "
            "configurations are told apart by their launch__grid_size / launch__block_size values "
            "only"
        )
    return out


def parse_file(path, name: str, keep=None) -> Parsed:
    """An Nsight Compute CSV export (plain or gzip) read as a stream: a raw page's rows are parsed
    batch by batch, the file is never held whole in memory; a report (.ncu-rep) and a details page
    are read whole (`parse`). keep: a predicate on metric names
    (collectors.ncu_values.analysis_metric): a raw page's metrics table then holds only those
    (Parsed.partial_rows has the whole table's rows); the other formats are read whole."""
    from collectors.decompress import read_chunks

    base = (name[:-3] if name.endswith(".gz") else name).lower()
    chunks = read_chunks(path, name, step=RAW_BATCH_BYTES)
    head = bytearray()
    for c in chunks:
        head += c
        if len(head) >= _HEAD_BYTES:
            break
    if base.endswith(REPORT_SUFFIXES):
        return parse(bytes(head) + b"".join(chunks), name)
    (idents, long, sections, names, units), fmt = _parse_csv(
        bytes(head), name, rest=chunks, keep=keep
    )
    parsed = _build(idents, long, name, fmt, sections=sections, names=names, units=units)
    # every row of a raw page has every metric of its header
    if keep is not None and fmt == "csv-raw":
        parsed.partial_rows["metrics"] = len(idents) * len(names)
    return parsed


def parse(data: bytes, name: str) -> Parsed:
    """Parse an Nsight Compute report or CSV export (already decompressed) into the kernel tables."""
    base = (name[:-3] if name.endswith(".gz") else name).lower()
    if base.endswith(REPORT_SUFFIXES):
        launches, sections, source = _parse_report(data, name)
        idents, long, _ = _long_from_launches(launches)
        return _build(idents, long, name, "ncu-rep", source, sections)
    (idents, long, sections, names, units), fmt = _parse_csv(data, name)
    return _build(idents, long, name, fmt, sections=sections, names=names, units=units)


def parse_file_analysis(path, name: str) -> Parsed:
    """`parse_file` keeping only the metrics the analysis and the pages read
    (collectors.ncu_values.analysis_metric): the format registry's partial reader of Nsight Compute
    CSV exports."""
    from collectors.ncu_values import analysis_metric

    return parse_file(path, name, keep=analysis_metric)
