"""Records a distributed training step on every GPU of one host, with a planted straggler (issue 41).

    python3 sample_traces/multi_gpu/record.py OUTDIR [--gpus N] [--quick] [--cpu]

It starts `torchrun --standalone --nproc-per-node N` once per job. There are six jobs: two ways of sharding, each
in three variants. The two ways:
- ddp:  DistributedDataParallel. Every rank holds the whole model, and each backward pass all-reduces the
        gradients in buckets.
- fsdp: `fully_shard` (FSDP2) on each block and on the model. Parameters are all-gathered before use, and the
        gradients are reduce-scattered.
The three variants:
- balanced: every rank does the same work;
- compute:  the last rank runs EXTRA_MATMULS more BF16 matmuls (n × n) after its forward pass in every step. This is
            more GPU work before its gradients are ready. Their GPU time is measured alone with CUDA events
            (`planted_gpu_ms` in summary.json);
- host:     the last rank's host sleeps HOST_DELAY_MS before its backward pass in every step. Its launches, and so
            its all-reduces, come that much later.

Each job writes one PyTorch profiler trace per rank: `<job>/rank<R>.json.gz`. It is recorded with a profiler
schedule, so each step is a `ProfilerStep#N` range, and torch.distributed is initialised, so the trace carries
`distributedInfo` (rank, world size, backend). Into `summary.json` go the versions, the GPUs, the planted rank and
amount, and each rank's time per step without the profiler. That time comes from CUDA events around each step (GPU
clock, median of STEPS steps) and from the host's clock.

`kernelscope analyze OUTDIR/<job>` must name the planted rank in every step of the compute and host jobs, with the
cause (compute or host), and no straggler in the balanced jobs (tests/analyzers/test_multigpu_real.py, once the
recordings are committed).

NVLink multicast stays off, as the lent machines set it: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 (kept if already set).
`--cpu` runs the ddp jobs on the CPU with the gloo backend, 2 processes. It checks the script on a machine with no
GPU. gloo has no reduce-scatter, which fully_shard needs, so the fsdp jobs are left out, and such traces have no GPU
kernels.
"""

import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

for _k, _v in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ.setdefault(_k, _v)

MODES = ("ddp", "fsdp")
VARIANTS = ("balanced", "compute", "host")
STEPS = 8  # profiled steps (ProfilerStep#2 .. #9 after wait 1, warm-up 1)
EXTRA_MATMULS = 8  # compute variant: extra n × n BF16 matmuls on the slow rank per step
HOST_DELAY_MS = 20.0  # host variant: the slow rank's sleep before backward, per step


def _args(argv):
    out = {"outdir": None, "gpus": None, "quick": False, "cpu": False, "job": None}
    it = iter(argv)
    for a in it:
        if a == "--gpus":
            out["gpus"] = int(next(it))
        elif a == "--job":
            out["job"] = next(it)
        elif a in ("--quick", "--cpu"):
            out[a[2:]] = True
        elif out["outdir"] is None:
            out["outdir"] = a
    if out["outdir"] is None:
        sys.exit(__doc__)
    return out


# ------------------------------------------------------------------------------------------ driver
def drive(opts) -> int:
    """Runs the six jobs, one torchrun each, and gathers summary.json."""
    import torch

    gpus = opts["gpus"] or (1 if opts["cpu"] else torch.cuda.device_count())
    if gpus < 2 and not opts["cpu"]:
        sys.exit(f"needs two or more GPUs; this host has {gpus}")
    procs = gpus if not opts["cpu"] else max(2, gpus)
    out = os.path.abspath(opts["outdir"])
    os.makedirs(out, exist_ok=True)
    summary = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version()))
        if torch.cuda.is_available()
        else None,
        "gpus": [torch.cuda.get_device_name(i) for i in range(gpus)] if not opts["cpu"] else [],
        "ranks": procs,
        "planted_rank": procs - 1,
        "steps": STEPS,
        "extra_matmuls": EXTRA_MATMULS,
        "host_delay_ms": HOST_DELAY_MS,
        "env": {k: os.environ[k] for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")},
        "jobs": {},
    }
    # gloo has no reduce-scatter, which fully_shard needs: on the CPU only the ddp jobs run
    for mode in MODES if not opts["cpu"] else ("ddp",):
        for variant in VARIANTS:
            job = f"{mode}_{variant}"
            os.makedirs(os.path.join(out, job), exist_ok=True)
            cmd = (
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    f"--nproc-per-node={procs}",
                    os.path.abspath(__file__),
                    out,
                    "--job",
                    job,
                ]
                + (["--quick"] if opts["quick"] else [])
                + (["--cpu"] if opts["cpu"] else [])
            )
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            with open(os.path.join(out, job, "torchrun.log"), "w") as f:
                f.write(r.stdout + r.stderr)
            print(f"{job}: rc {r.returncode} in {time.perf_counter() - t0:.1f} s", flush=True)
            done = os.path.exists(os.path.join(out, job, "timing.json")) and all(
                os.path.exists(os.path.join(out, job, f"rank{i}.json.gz")) for i in range(procs)
            )
            if r.returncode and not done:
                print(r.stderr[-3000:], file=sys.stderr)
                return r.returncode
            if r.returncode:
                print(
                    f"{job}: every output written; torchrun's exit status {r.returncode} is its teardown's"
                )
            with open(os.path.join(out, job, "timing.json")) as f:
                summary["jobs"][job] = json.load(f)
            os.remove(os.path.join(out, job, "timing.json"))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


# ------------------------------------------------------------------------------------------ one rank
def rank_main(opts) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule

    mode, variant = opts["job"].split("_")
    cpu = opts["cpu"]
    dist.init_process_group("gloo" if cpu else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cpu") if cpu else torch.device("cuda", local)
    if not cpu:
        torch.cuda.set_device(dev)
    torch.manual_seed(0)
    d, layers, batch, seq = (256, 2, 2, 64) if opts["quick"] or cpu else (2048, 8, 8, 512)
    dtype = torch.float32 if cpu else torch.bfloat16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.up = nn.Linear(d, 4 * d)
            self.down = nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    model = nn.Sequential(*[Block() for _ in range(layers)]).to(dev)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=None if cpu else [local])
    else:
        from torch.distributed.fsdp import fully_shard

        for b in model:
            fully_shard(b)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, d, device=dev)
    slow = rank == world - 1
    n_extra = 1024 if cpu else 4096
    a = torch.randn(n_extra, n_extra, device=dev, dtype=dtype)

    def extra():
        y = a
        for _ in range(EXTRA_MATMULS):
            y = (y @ a) * 1e-3
        return y

    def step():
        with torch.autocast(dev.type, dtype=dtype, enabled=not cpu):
            loss = model(x).float().pow(2).mean()
        if slow and variant == "compute":
            extra()
        if slow and variant == "host":
            time.sleep(HOST_DELAY_MS / 1e3)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync():
        if not cpu:
            torch.cuda.synchronize()
        dist.barrier()

    for _ in range(3):  # warm-up: allocator, NCCL communicators, cuBLAS handles
        step()
    sync()
    # the planted work alone (compute variant): its GPU time on the slow rank
    planted = None
    if not cpu:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            e0.record()
            extra()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
        planted = statistics.median(times)
    sync()
    # the same steps without the profiler: CUDA events on the stream before each step and after the last
    gpu_ms, host_ms = [], []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        if not cpu:
            e0.record()
        step()
        if not cpu:
            e1.record()
            e1.synchronize()
            gpu_ms.append(e0.elapsed_time(e1))
        host_ms.append((time.perf_counter() - t0) * 1e3)
    sync()
    out = os.path.join(opts["outdir"], opts["job"])
    acts = [ProfilerActivity.CPU] + ([] if cpu else [ProfilerActivity.CUDA])
    with profile(
        activities=acts,
        schedule=schedule(wait=1, warmup=1, active=STEPS, repeat=1),
        on_trace_ready=lambda p: _save(p, out, rank),
    ) as prof:
        for _ in range(STEPS + 2):
            step()
            prof.step()
    sync()
    mine = {
        "rank": rank,
        "device": str(dev),
        "step_gpu_median_ms": statistics.median(gpu_ms) if gpu_ms else None,
        "step_host_median_ms": statistics.median(host_ms),
        "planted_gpu_ms": planted if slow and variant == "compute" else None,
    }
    every = [None] * world
    dist.all_gather_object(every, mine)
    if rank == 0:
        with open(os.path.join(out, "timing.json"), "w") as f:
            json.dump({"ranks": every, "mode": mode, "variant": variant}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    # every output is written: leave without the interpreter's teardown, where gloo's threads have
    # aborted the process ("terminate called without an active exception") after the work was done
    os._exit(0)


def _save(prof, out: str, rank: int) -> None:
    raw = os.path.join(out, f"rank{rank}.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


if __name__ == "__main__":
    o = _args(sys.argv[1:])
    sys.exit(rank_main(o) if o["job"] else drive(o))
