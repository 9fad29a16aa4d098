"""A writer process for the store tests: `python -m tests.collectors.store_writer STORE MODE [N]`.

    loop   ingest a new bench document every iteration (a new run each time) until killed; prints "ready" first
    rounds ingest, N rounds, the shared files (the same runs as every other writer) and one document of its own
           per round; prints one line per stored run: "<run id> <created>"

Everything goes through dashboard.core.source.Source.ingest_bytes, the path `kernelscope ingest` and the
upload take.
"""

from __future__ import annotations

import json
import os
import sys

from tests.conftest import H200_KERNELS, H200_TORCH
from tests.dashboard.helpers import bench_doc

SHARED = [H200_KERNELS / "basic_raw.csv.gz", H200_TORCH / "ffn_M1_graph.json.gz"]


def own_doc(tag: str) -> bytes:
    doc = json.loads(bench_doc("NVIDIA H200", 1.0))
    doc["started"] = f"2026-11-29T00:00:00Z {tag}"  # a different artifact: a run of its own
    return json.dumps(doc).encode()


def main(store: str, mode: str, n: int = 10) -> int:
    from collectors.store import Store
    from dashboard.core.source import Source

    src = Source(Store(store))
    if mode == "loop":
        print("ready", flush=True)
        i = 0
        while True:
            src.ingest_bytes(own_doc(f"loop-{os.getpid()}-{i}"), f"bench_{i}.json")
            i += 1
    for r in range(n):
        for p in SHARED:
            run, created = src.ingest_bytes(p.read_bytes(), p.name)
            print(run.run_id, created, flush=True)
        run, created = src.ingest_bytes(
            own_doc(f"w{os.getpid()}-r{r}"), f"bench_{os.getpid()}_{r}.json"
        )
        print(run.run_id, created, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *(int(x) for x in sys.argv[3:])))
