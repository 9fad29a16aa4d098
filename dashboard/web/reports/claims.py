"""Claims (?verdict=V…&claim=ID): the "whitepaper" seed's claims checked against the GPU registry
and the case models (analyzers.cases.claims), with the store's bench measurements where a claim
names one."""

from __future__ import annotations

import polars as pl

from analyzers.errors import UnknownName
from dashboard.web.reports.report_blocks import Heading, Report, Table, Text, text
from dashboard.web.reports.run_links import param_list, plain_cols
from dashboard.core.source import Source
from analyzers.cases import CLAIM_VERDICTS, claims

CLAIMS_INTRO = (
    "Numbers, names and code from a self-described internal “whitepaper”, each put through generic "
    "checks — units, physical peaks, code that can run, internal consistency, citations that can "
    "be checked — against the GPU registry, the textbook case models and cited evidence. The "
    "verdict is the most severe check's, computed, never written down: above-peak, unit-error, "
    "refuted, self-contradictory, implausible, unverifiable or plausible."
)


def checked_claims(src: Source) -> list:
    """Every claim with its verdict, and the store's bench measurement where the claim names one."""
    return claims(measured=src.claim_measurements())


def verdict_kinds() -> list[str]:
    return list(CLAIM_VERDICTS)


def claim_verdicts(raw) -> list[str]:
    """The verdicts a URL filters on (?verdict=V, repeatable); unknown ones are ignored."""
    return [v for v in param_list(raw) if v in CLAIM_VERDICTS]


def claims_table(shown: list, total: int, chosen: list[str]) -> Table:
    frame = pl.DataFrame(
        [
            {
                "id": c.id,
                "verdict": c.verdict,
                "GPU": c.gpu.replace("NVIDIA ", ""),
                "claimed": c.claimed,
                "text": c.gloss,
                "explanation": c.explanation,
            }
            for c in shown
        ],
        schema={c: pl.String for c in ("id", "verdict", "GPU", "claimed", "text", "explanation")},
    )
    return Table(
        "claims",
        frame,
        {
            "id": text("id"),
            "verdict": text("verdict", "computed from the GPU registry and the case models"),
            "GPU": text("GPU"),
            "claimed": text("claimed"),
            "text": text("text"),
            "explanation": text("explanation"),
        },
        caption=f"{len(shown)} of {total} claims"
        + (f"; verdicts {', '.join(chosen)}" if chosen else ""),
    )


def claim_detail(c) -> list:
    out: list = [
        Heading(c.id),
        Text(f"> {c.text}\n\n{c.gloss} ({c.where} of the whitepaper)"),
        Text(f"**{c.verdict}** — {c.explanation}"),
    ]
    if c.measurement:
        out.append(
            Text(
                f"Measurable on your GPU with {c.measurement.kind} `{c.measurement.name}`: "
                f"{c.measurement.how}.",
                "caption",
            )
        )
    if c.measured_note:
        out.append(Text(c.measured_note))
    if c.findings:
        ev = pl.DataFrame(
            [{"check": f.check, "verdict": f.verdict, "evidence": f.text} for f in c.findings],
            schema={"check": pl.String, "verdict": pl.String, "evidence": pl.String},
        )
        out.append(
            Table(
                "claim_evidence",
                ev,
                {
                    "check": text("check", "the generic check (analyzers.cases.claim_checks)"),
                    "verdict": text("verdict"),
                    "evidence": text("evidence"),
                },
            )
        )
    if c.details:
        df = pl.DataFrame(
            [
                {k: (str(v) if not isinstance(v, (int, float)) else v) for k, v in d.items()}
                for d in c.details
            ],
            infer_schema_length=None,
        )
        out.append(Table("claim_details", df, plain_cols(df)))
    return out


def build(src: Source, params: dict, measured: dict | None = None) -> Report:
    """The Claims page of a URL (?verdict=V…&claim=ID): the claims table and the chosen claim in
    detail, with the store's bench measurements (claim_measurements) unless `measured` is given. An
    export does not fall back: an unknown claim id is an error."""

    cs = claims(measured=src.claim_measurements() if measured is None else measured)
    if params.get("claim") and params["claim"] not in {c.id for c in cs}:
        raise UnknownName("claim", params["claim"], "`kernelscope claims` lists them")
    chosen = claim_verdicts(params.get("verdict"))
    shown = [c for c in cs if not chosen or c.verdict in chosen]
    rep = Report("Claims", subtitle=CLAIMS_INTRO)
    rep.add(claims_table(shown, len(cs), chosen))
    if shown:
        rep.add(*claim_detail(next((c for c in shown if c.id == params.get("claim")), shown[0])))
    return rep
