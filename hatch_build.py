"""Install-time build of the compiled Kineto scanner (collectors/_kineto_scan.c).

hatchling builds no C extensions itself, so this hook compiles the one C file with setuptools'
compiler support (the platform's compiler and flags for this Python) into the wheel, or next to its
source for an editable install. Without a compiler the install goes on without it:
collectors.kineto_typed then decodes every piece of a trace with msgspec (the same tables, about
1.5x the CPU time on a 300 MB trace). KERNELSCOPE_NO_EXTENSION=1 skips it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "collectors._kineto_scan"
SOURCE = "collectors/_kineto_scan.c"


class ScannerBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or os.environ.get("KERNELSCOPE_NO_EXTENSION"):
            return
        root = Path(self.root)
        try:
            self._out, built = _compile(root)
        # any exception: no compiler, no headers: the pure-Python reader stays
        except Exception as e:
            self.app.display_warning(
                f"kernelscope: the compiled Kineto scanner was not built ({e}); traces are read by "
                "msgspec alone, with the same results"
            )
            return
        rel = f"collectors/{built.name}"
        # the source tree is on the path: the module goes beside its source
        if version == "editable":
            shutil.copy2(built, root / rel)
        else:
            build_data["force_include"][str(built)] = rel
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        out = getattr(self, "_out", None)
        if out is not None:  # the wheel holds its copy now
            shutil.rmtree(out, ignore_errors=True)


def _compile(root: Path) -> tuple[Path, Path]:
    """(the temporary folder, the built module in it)"""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    out = Path(tempfile.mkdtemp(prefix="ks-ext-"))
    dist = Distribution(
        {
            "name": "kernelscope-scan",
            "ext_modules": [Extension(MODULE, [str(root / SOURCE)], extra_compile_args=["-O2"])],
        }
    )
    cmd = build_ext(dist)
    cmd.build_lib = str(out / "lib")
    cmd.build_temp = str(out / "tmp")
    cmd.ensure_finalized()
    cmd.run()
    return out, Path(cmd.get_ext_fullpath(MODULE))
