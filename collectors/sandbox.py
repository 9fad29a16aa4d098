"""Third-party readers in a child process: a reader that aborts, hangs or eats memory costs one
refusal, never the process that asked (the dashboard's server, a long `kernelscope ingest`).

    run_reader(task, data, name, suffix) -> object     the task's JSON result, or an ArtifactError in one line

More: docs/architecture.md, *collectors.sandbox*.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from collectors import progress
from collectors.errors import ArtifactError
from collectors.limits import ncu_child_memory_bytes, ncu_child_seconds, size_text

_ROOT = Path(__file__).resolve().parents[1]
_PREFIX = "ks-sandbox-"
_RESULT = "result.json"
_ERROR = "error.json"
#: task -> (module, function): the function takes (path, name) and returns a JSON-serialisable
#: result, or raises ArtifactError
TASKS = {
    "ncu-rep": ("collectors.ncu_rep", "read_report_file"),
    "ncu-rep-source": ("collectors.ncu_rep", "read_source_text_file"),
}


def _limits(task: str, size: int) -> tuple[float, int]:
    seconds = ncu_child_seconds()
    memory = ncu_child_memory_bytes() or (2 << 30) + 32 * size
    return seconds, memory


def run_reader(
    task: str, data: bytes, name: str, suffix: str, args: tuple[str, ...] = ()
) -> object:
    """Run TASKS[task] on `data` (written as `artifact<suffix>`) in a child process; its result, or ArtifactError."""
    seconds, memory = _limits(task, len(data))
    folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{task}-{os.getpid()}-"))
    try:
        path = folder / f"artifact{suffix}"
        try:
            path.write_bytes(data)
        except OSError as e:
            raise ArtifactError(
                name, f"cannot write a temporary copy to read it ({e.strerror})"
            ) from None
        env = dict(
            os.environ,
            KS_SANDBOX_AS=str(memory),
            KS_SANDBOX_CPU=str(int(seconds) + 1),
            PYTHONPATH=os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
        )
        listening = progress.listening()
        pfile = str(folder / "progress.tsv")
        if listening:
            # the child says which launch it reads; relayed below
            env[progress.CHILD_FILE] = pfile
        cmd = [sys.executable, "-m", "collectors.sandbox", task, str(folder), *args]
        started = time.monotonic()
        err_path = (
            folder / "stderr.log"
        )  # a file, not a pipe: the wait below polls, it does not read
        with open(err_path, "wb") as errf:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errf,
                env=env,
                cwd=str(folder),
                start_new_session=True,
            )
        last = None  # the child's step reported last
        try:
            while True:
                left = seconds - (time.monotonic() - started)
                if left <= 0:
                    _kill(proc)
                    raise ArtifactError(
                        name,
                        f"reading it took longer than {seconds:g} s (the limit for one report; "
                        "KERNELSCOPE_NCU_SECONDS raises it)",
                    )
                try:
                    proc.wait(timeout=min(left, 0.2) if listening else left)
                    break
                except subprocess.TimeoutExpired:
                    last = _relay(pfile, last) if listening else None
            if listening:  # the child's last step (e.g. "launch 9 of 9"), written as it finished
                _relay(pfile, last)
        except BaseException:
            _kill(proc)
            raise
        try:
            err = err_path.read_bytes()[-65536:]
        except OSError:
            err = b""
        rc = proc.returncode
        result, error = folder / _RESULT, folder / _ERROR
        if rc == 0 and result.is_file():
            try:
                return orjson.loads(result.read_bytes())
            except orjson.JSONDecodeError:
                raise ArtifactError(name, "the report reader returned no readable result") from None
        if error.is_file():
            try:
                problem = str(orjson.loads(error.read_bytes()).get("problem") or "")
            except (orjson.JSONDecodeError, AttributeError):
                problem = ""
            if problem:
                raise ArtifactError(name, problem)
        raise ArtifactError(
            name, _describe_failure(rc, err or b"", memory, time.monotonic() - started, seconds)
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass


def _relay(pfile: str, last):
    """Report the step the reader's child wrote last, unless it was already reported; returns it."""
    step = progress.read_child(pfile)
    if step is not None and step != last:
        progress.report(step.stage, step.done, step.total, step.unit)
        return step
    return last


def _describe_failure(rc: int, err: bytes, memory: int, took: float, seconds: float) -> str:
    text = err.decode("utf-8", "replace")
    if "MemoryError" in text or "std::bad_alloc" in text or "Cannot allocate memory" in text:
        return (
            f"reading it needs more than {size_text(memory)} of memory (the limit for one report's "
            "reader; KERNELSCOPE_NCU_MEMORY_MB raises it): a corrupt report, or a very large one"
        )
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        if sig == "SIGXCPU" or took >= seconds:
            return f"reading it took longer than {seconds:g} s of CPU (the limit for one report)"
        # the library aborts on a failed allocation too, not always saying so
        if sig == "SIGABRT" and memory:
            return (
                f"NVIDIA's report reader crashed on it ({sig}): a corrupt or truncated Nsight "
                f"Compute report, or reading it needs more than {size_text(memory)} of memory (the "
                "limit for one report's reader; KERNELSCOPE_NCU_MEMORY_MB raises it; this server "
                "is unaffected; nothing was stored)"
            )
        return (
            f"NVIDIA's report reader crashed on it ({sig}): a corrupt or truncated Nsight Compute "
            "report (this server is unaffected; nothing was stored)"
        )
    return f"NVIDIA's report reader failed on it (exit {rc}): a corrupt or truncated Nsight Compute report"


def sweep_stale(max_age_s: float = 6 * 3600) -> int:
    """Remove sandbox folders whose parent process is gone (or that are older than max_age_s). Returns how many."""
    n = 0
    tmp = Path(tempfile.gettempdir())
    try:
        entries = list(tmp.iterdir())
    except OSError:
        return 0
    now = time.time()
    for p in entries:
        if not p.name.startswith(_PREFIX) or not p.is_dir():
            continue
        parts = p.name[len(_PREFIX) :].split("-")
        pid = next((int(x) for x in parts if x.isdigit()), None)
        try:
            old = now - p.stat().st_mtime > max_age_s
        except OSError:
            continue
        if old or (pid is not None and not _alive(pid)):
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------------------------


def _child(task: str, folder: str, *args: str) -> int:
    import importlib
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        mem = int(os.environ.get("KS_SANDBOX_AS", "0"))
        if mem:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        cpu = int(os.environ.get("KS_SANDBOX_CPU", "0"))
        if cpu:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    except (ValueError, OSError):
        pass
    out = Path(folder)
    artifact = next(out.glob("artifact*"))
    module, func = TASKS[task]
    pfile = os.environ.get(progress.CHILD_FILE)
    try:
        fn = getattr(importlib.import_module(module), func)
        with progress.reporting(progress.child_sink(pfile) if pfile else None):
            result = fn(str(artifact), artifact.name, *args)
    except ArtifactError as e:
        (out / _ERROR).write_bytes(orjson.dumps({"problem": e.problem}))
        return 3
    except MemoryError:
        sys.stderr.write("MemoryError\n")
        return 4
    data = orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)
    tmp = out / (_RESULT + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out / _RESULT)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2], *sys.argv[3:]))
