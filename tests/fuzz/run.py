"""The long fuzzing run: N mutants of the real samples through every command and page, on several
workers.

    python -m tests.fuzz.run --mutants 3000 [--workers 2] [--seed 1] [--formats ncu-rep,ncu-csv,...]
                             [--json docs/fuzzing-run.json] [--keep-failures DIR]

Mutant i of format F is made by random.Random(f"{seed}:{F}:{i}") from one of F's seeds
(tests.fuzz.seeds), so a failure is reproduced by its format and index alone (`--only F:i`). Mutants
are spread over the formats in proportion to FORMAT_SHARE. The summary counts each status
(tests.fuzz.oracle) per format; the run fails (exit 1) when any mutant ends in a failure status.
Failing mutants are written to --keep-failures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

FORMAT_SHARE = {"ncu-rep": 0.2, "ncu-csv": 0.2, "kineto": 0.2, "nsys": 0.2, "bench": 0.2}


def plan(total: int, formats: list[str]) -> list[tuple[str, int]]:
    share = {f: FORMAT_SHARE.get(f, 0.2) for f in formats}
    s = sum(share.values())
    counts = {f: int(total * share[f] / s) for f in formats}
    for f in formats[: total - sum(counts.values())]:
        counts[f] += 1
    todo = [(f, i) for f in formats for i in range(counts[f])]
    random.Random(0).shuffle(todo)
    return todo


def make_mutant(fmt: str, i: int, seed: int):
    from tests.fuzz.mutate import mutate
    from tests.fuzz.seeds import seeds

    rng = random.Random(f"{seed}:{fmt}:{i}")
    s = rng.choice(seeds()[fmt])
    return s, mutate(rng, s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--mutants", type=int, default=3000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--formats", default=",".join(FORMAT_SHARE))
    ap.add_argument(
        "--timeout", type=float, default=120.0, help="seconds one mutant may take (a hang above)"
    )
    ap.add_argument("--json", type=Path, help="write the summary (and every failure) here")
    ap.add_argument("--keep-failures", type=Path, help="write failing mutants into this folder")
    ap.add_argument("--only", help="FORMAT:INDEX: run one mutant and print its outcome")
    ap.add_argument(
        "--no-pages",
        action="store_true",
        help="skip building the dashboard pages for accepted runs",
    )
    args = ap.parse_args(argv)
    from tests.fuzz.oracle import FAILURES, Harness

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    todo = (
        [(args.only.split(":")[0], int(args.only.split(":")[1]))]
        if args.only
        else plan(args.mutants, formats)
    )
    lock = threading.Lock()
    counts: dict[str, Counter] = defaultdict(Counter)
    failures: list[dict] = []
    slowest: list[tuple[float, str]] = []
    done = [0]
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ks-fuzz-"))

    def worker(k: int) -> None:
        h = Harness(work / f"w{k}", timeout_s=args.timeout, pages=not args.no_pages)
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    fmt, i = todo.pop()
                seed_file, m = make_mutant(fmt, i, args.seed)
                o = h.check(m)
                with lock:
                    counts[fmt][o.status] += 1
                    done[0] += 1
                    slowest.append((o.seconds, f"{fmt}:{i}"))
                    if o.status in FAILURES:
                        failures.append(
                            {
                                "mutant": f"{fmt}:{i}",
                                "seed": seed_file.name,
                                "ops": m.ops,
                                "status": o.status,
                                "detail": o.detail[:2000],
                            }
                        )
                        if args.keep_failures:
                            args.keep_failures.mkdir(parents=True, exist_ok=True)
                            (args.keep_failures / f"{fmt}_{i}_{m.name}").write_bytes(m.data)
                        print(
                            f"FAIL {fmt}:{i} {m.ops} {o.status}: {o.detail[:300]}",
                            file=sys.stderr,
                            flush=True,
                        )
                    if done[0] % 100 == 0:
                        print(
                            f"... {done[0]} mutants, {time.monotonic() - t0:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            h.stop()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(max(1, args.workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    total = Counter()
    for c in counts.values():
        total.update(c)
    statuses = ["accepted", "refused", *FAILURES]
    print(f"{'format':10} " + " ".join(f"{s:>13}" for s in statuses) + "   total")
    for f in formats:
        c = counts.get(f, Counter())
        print(f"{f:10} " + " ".join(f"{c[s]:>13}" for s in statuses) + f"   {sum(c.values()):>5}")
    print(
        f"{'all':10} " + " ".join(f"{total[s]:>13}" for s in statuses) + f"   "
        f"{sum(total.values()):>5}"
    )
    slowest.sort(reverse=True)
    print(
        f"wall {wall:.0f} s on {args.workers} workers; slowest mutant {slowest[0][0]:.1f} s "
        f"({slowest[0][1]})"
        if slowest
        else ""
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "mutants": sum(total.values()),
                    "seed": args.seed,
                    "workers": args.workers,
                    "wall_s": round(wall, 1),
                    "by_format": {f: dict(c) for f, c in counts.items()},
                    "total": dict(total),
                    "failures": failures,
                    "slowest": [{"seconds": round(s, 2), "mutant": m} for s, m in slowest[:10]],
                },
                indent=1,
            )
            + "\n"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
