"""The one error type for input that is not what it claims to be."""
from __future__ import annotations


class ArtifactError(Exception):
    """A file (or uploaded bytes) could not be read as the artifact it claims to be.

    Carries the file name and what was expected, so the CLI and the dashboard can print one line
    ("kernelscope: r.csv: not an Nsight Compute CSV export (no header row with "ID" and "Kernel Name")")
    instead of a traceback.
    """

    def __init__(self, source: str, problem: str):
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")
