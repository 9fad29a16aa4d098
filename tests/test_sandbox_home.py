"""Issue 42: the suite never writes into the user's own store. tests/conftest.py points HOME at a
temporary folder before anything is imported and fails the session if the real ~/.kernelscope
changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REAL_HOME


def test_home_is_a_temporary_folder_and_the_default_store_follows_it():
    home = Path(os.environ["HOME"]).resolve()
    assert home != REAL_HOME and home.name.startswith("ks-test-home-")
    from collectors.freshness import default_store_dir

    assert Path(default_store_dir()).resolve().is_relative_to(home)
    before = (
        sorted(p.name for p in (REAL_HOME / ".kernelscope").rglob("*"))
        if (REAL_HOME / ".kernelscope").exists()
        else []
    )
    exe = Path(sys.executable).with_name("kernelscope")
    out = subprocess.run([str(exe), "runs"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    after = (
        sorted(p.name for p in (REAL_HOME / ".kernelscope").rglob("*"))
        if (REAL_HOME / ".kernelscope").exists()
        else []
    )
    # a subprocess with the default store stays in the test's HOME
    assert after == before
