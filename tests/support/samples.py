"""Recorded sample files several test modules read."""

from __future__ import annotations

from tests.conftest import SAMPLES

H200 = SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"
