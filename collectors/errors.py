"""Typed errors for what a user can fix: a file that is not what it claims, a run id that is not in
the store.

Each is said in one line; the command line prints `kernelscope: <message>` and exits 1, the
dashboard shows the message in place. Anything else that escapes is a bug and is reported as one
(analyzers.errors has the errors of the models: unknown GPU, case or claim, bad parameter).
"""

from __future__ import annotations


class InputError(Exception):
    """Base of the collectors' user errors: the message is one line meant for the user."""

    def __str__(self) -> str:  # one line, always
        return " ".join(super().__str__().split())


class ArtifactError(InputError):
    """A file (or uploaded bytes) could not be read as the artifact it claims to be.

    Carries the file name and what was wrong, so the CLI and the dashboard can print one line
    ("kernelscope: r.csv: not an Nsight Compute CSV export (no header row with "ID" and "Kernel
    Name")").
    """

    def __init__(self, source: str, problem: str):
        self.source = str(source)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.source}: {self.problem}")


class RunNotFound(InputError, LookupError):
    """A run id (or prefix) that names no run of the store, or more than one, or is not a run id at all."""

    def __init__(self, run_id: str, problem: str | None = None, *, message: str | None = None):
        self.run_id = str(run_id)
        self.problem = problem or "no such run in this store"
        super().__init__(
            message
            or (
                f"no run {self.run_id!r} in this store"
                if problem is None
                else f"run {self.run_id!r}: {problem}"
            )
        )


class StoreError(InputError):
    """The store cannot be written or read (disk full, permissions): names the path and the reason."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


#: what ERR_NVGPUCTRPERM means and what to do, said once wherever it is recognised (a CSV or log, a
#: bench run)
COUNTER_PERMISSION = (
    "the GPU's performance counters may not be read by this user (ERR_NVGPUCTRPERM), so Nsight "
    "Compute profiled nothing; an administrator allows them with the NVIDIA driver option "
    "NVreg_RestrictProfilingToAdminUsers=0 (`options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
    "in /etc/modprobe.d/, then reload the driver or reboot; in a container also "
    "--cap-add=SYS_ADMIN; https://developer.nvidia.com/ERR_NVGPUCTRPERM); until then use event "
    "timing: `kernelscope bench` without --ncu, a PyTorch profiler trace or an Nsight Systems "
    "export"
)


def counters_forbidden(text: str) -> bool:
    """Whether ncu's output (a log, or a CSV export with its ==PROF== / ==ERROR== lines) reports ERR_NVGPUCTRPERM."""
    return "ERR_NVGPUCTRPERM" in text
