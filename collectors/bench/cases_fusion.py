"""Chapter sections 5.3 and 5.5 cases: fusion, buffers, pipelines and runtime replay
(fusion.activation_chain, flash.attention_traffic, graph.replay).
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import json
import os
import tempfile

from collectors.bench import harness
from collectors.bench.context import NAN, Context
from collectors.bench.harness import MIB, make_record, timing_records


# =============================================================================================
# 5.3 Neighbouring operators: fusion, buffers, pipelines
# =============================================================================================


def case_fusion_activation_chain(ctx: Context) -> None:
    """Z = SiLU(G) * U over [M, 12288] BF16: unfused torch (two kernels, SiLU(G) written and read
    back) vs one fused Triton kernel, over M."""
    torch = ctx.torch
    import torch.nn.functional as F

    from collectors.bench import triton_kernels as tk

    f = 12288
    for m in ctx.pick((1, 16, 128, 1024, 4096), (1, 64)):
        with ctx.part(f"M={m}"):
            g = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
            u = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
            z = torch.empty_like(g)
            ref = F.silu(g.double()) * u.double()
            ctx.check(f"unfused M={m}", F.silu(g) * u, ref, 1e-2)
            z.fill_(NAN)
            tk.silu_mul(g, u, z)
            ctx.check(f"fused M={m}", z, ref, 1e-2)
            for impl, fn, fused in (
                ("unfused torch", lambda: F.silu(g) * u, False),
                ("fused triton", lambda: tk.silu_mul(g, u, z), True),
            ):
                nbytes = harness.silu_mul_bytes(m, f, 2, fused=fused)
                t = ctx.time(fn, flush=ctx.flush_if(nbytes))
                ctx.emit(
                    timing_records(
                        "fusion.activation_chain",
                        {"m": m, "f": f, "impl": impl},
                        t.stats,
                        source=t.source,
                        bytes_moved=nbytes,
                        notes=t.note(),
                    )
                )


def case_flash_attention_traffic(ctx: Context) -> None:
    """One head, d = 128, causal, BF16: torch SDPA with the math backend (materialises the scores)
    vs the flash backend, over L: time and extra peak memory (max_memory_allocated - allocated
    before)."""
    torch = ctx.torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    d = 128
    for length in ctx.pick((2048, 4096, 8192), (1024,)):
        q, k, v = (
            torch.randn(1, 1, length, d, device=ctx.dev, dtype=torch.bfloat16) for _ in range(3)
        )
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        for name, backend in (("math", SDPBackend.MATH), ("flash", SDPBackend.FLASH_ATTENTION)):
            with ctx.part(f"{name} L={length}"):

                def fn(backend=backend):
                    with sdpa_kernel([backend]):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                ctx.check(f"{name} L={length}", fn(), ref, 1e-2)
                ctx.sync()
                torch.cuda.reset_peak_memory_stats(ctx.dev)
                before = torch.cuda.memory_allocated(ctx.dev)
                o = fn()
                ctx.sync()
                extra = torch.cuda.max_memory_allocated(ctx.dev) - before
                del o
                params = {
                    "backend": name,
                    "length": length,
                    "head_dim": d,
                    "heads": 1,
                    "causal": True,
                }
                ctx.emit(
                    make_record(
                        "flash.attention_traffic",
                        "extra_peak_memory",
                        extra,
                        "B",
                        params,
                        source="torch memory stats",
                        n=1,
                        notes="max_memory_allocated "
                        "- memory_allocated before the call (output included)",
                    )
                )
                t = ctx.time(fn, flush=ctx.flush_if(64 * MIB))
                ctx.emit(
                    timing_records(
                        "flash.attention_traffic",
                        params,
                        t.stats,
                        source=t.source,
                        bytes_moved=harness.attention_min_bytes(length, d),
                        notes=t.note(),
                    )
                )


# =============================================================================================
# 5.5 Runtime: submission, replay
# =============================================================================================


def _profile_counts(ctx: Context, fn, calls: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        ctx.sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    return harness.count_launches(events)


def case_graph_replay(ctx: Context) -> None:
    """Qwen3-8B FFN (H 4096, F 12288, BF16) at M = 1: three calls eagerly vs the same three captured
    in one CUDA graph, with the activation unfused (torch) or fused (Triton); time per FFN (device
    idle before each repetition), kernels and host launches per FFN counted with the torch profiler."""
    torch = ctx.torch
    import torch.nn.functional as F

    from collectors.bench import triton_kernels as tk

    hdim, fdim = ctx.pick((4096, 12288), (1024, 3072))
    per = 3
    wg = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
    wu = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
    wd = (torch.randn(fdim, hdim, device=ctx.dev) * 0.02).bfloat16()
    x = torch.randn(1, hdim, device=ctx.dev).bfloat16()
    z = torch.empty(1, fdim, device=ctx.dev, dtype=torch.bfloat16)
    xd = x.double()
    ref = (F.silu(xd @ wg.double()) * (xd @ wu.double())) @ wd.double()
    ffns = {
        "unfused": lambda: (F.silu(x @ wg) * (x @ wu)) @ wd,
        "fused triton": lambda: tk.silu_mul(x @ wg, x @ wu, z) @ wd,
    }
    for act, ffn in ffns.items():
        with ctx.part(f"{act}"):
            ctx.check(f"ffn {act}", ffn(), ref, 2e-2)

            def eager(ffn=ffn):
                for _ in range(per):
                    ffn()

            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                eager()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs = [ffn() for _ in range(per)]
            g.replay()
            ctx.sync()
            ctx.check(f"ffn {act} graph", outs[-1], ref, 2e-2)
            for mode, fn in (("eager", eager), ("graph", g.replay)):
                params = {
                    "mode": mode,
                    "activation": act,
                    "m": 1,
                    "hidden": hdim,
                    "intermediate": fdim,
                    "ffn_per_call": per,
                }
                t = ctx.time(
                    fn,
                    sync_each=True,
                    allow_graph=False,
                    max_reps=ctx.pick(100, 10),
                    batch=ctx.pick(8, 1),
                )
                ctx.emit(
                    make_record(
                        "graph.replay",
                        "time_per_ffn",
                        t.median / per,
                        "s",
                        params,
                        source=t.source,
                        cv=t.stats.cv,
                        n=t.stats.n,
                        notes=f"{per * t.batch} FFN per repetition ({t.batch} calls "
                        f"of {per}); device idle before each repetition; " + t.note(),
                    )
                )
                with ctx.part(f"{act} {mode} profiler counts"):
                    c = _profile_counts(ctx, fn, 2)
                    ctx.emit(
                        make_record(
                            "graph.replay",
                            "kernels_per_ffn",
                            c["kernels"] / (2 * per),
                            "count",
                            params,
                            source="torch profiler",
                            n=2,
                        )
                    )
                    ctx.emit(
                        make_record(
                            "graph.replay",
                            "host_launches_per_ffn",
                            (c["kernel_launches"] + c["graph_launches"]) / (2 * per),
                            "count",
                            params,
                            source="torch profiler",
                            n=2,
                            notes="kernel launch calls + graph launch calls",
                        )
                    )
            del g, outs
