"""Typed errors of the analyzers: a name the registries do not know, a parameter a model cannot
take.

Like collectors.errors, each says in one line what the user can fix; the command line prints it and
exits 1. (The analyzers do not import the collectors, so they have their own base class; the CLI
catches both.)
"""

from __future__ import annotations


class AnalysisError(Exception):
    """Base of the analyzers' user errors: the message is one line meant for the user."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class UnknownName(AnalysisError, LookupError):
    """A GPU, case, claim, page, device ... that is not known. `what` says which registry, `hint` where to look."""

    def __init__(self, what: str, name, hint: str = "", *, message: str | None = None):
        self.what = what
        self.name = name
        self.hint = hint
        super().__init__(message or (f"no {what} {name!r}" + (f" ({hint})" if hint else "")))


class ParameterError(AnalysisError, ValueError):
    """A parameter value a model or a page cannot take (out of range, not a number, impossible configuration)."""
