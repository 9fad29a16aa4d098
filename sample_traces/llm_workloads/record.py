"""Records the real workloads the dashboard and the tests read: what users run on a GPU today.

    python3 sample_traces/llm_workloads/record.py OUTDIR [--schedule] [--quick] [eager graph compile train two]
    ncu --clock-control none --set full --nvtx --nvtx-include "token_8/" -o OUTDIR/decode_compile_token8 \
        python3 sample_traces/llm_workloads/record.py OUTDIR compile --ncu

On one CUDA GPU it writes, into OUTDIR, PyTorch profiler (Kineto) traces, gzipped, of:
- decode_eager:   a Llama-style decoder (8 layers, d 2048, 16 heads, SwiGLU 5632, vocab 32000, BF16, static KV
                  cache of 256) generating 16 tokens one by one, eagerly: one ProfilerStep per token;
- decode_graph:   the same decode step captured once as a CUDA graph (before profiling) and replayed per token;
- decode_compile: the same decode step under torch.compile (Inductor, default mode); step 0 compiles;
- train_step:     a GPT-style training step (8 layers, d 1024, batch 8 x 512 tokens, BF16 autocast, fused AdamW),
                  8 steps, one ProfilerStep each; step 0 allocates the optimizer state;
- two_streams:    a GPU-bound main stream (BF16 4096^3 matmuls) with a side stream that copies a pinned host
                  buffer and runs a small kernel ten times; steps are `record_function("iteration_N")` ranges, not
                  ProfilerSteps.
and `summary.json`: versions, the GPU, and for each workload the same program timed without the profiler: per step,
CUDA events recorded on the stream before each step and after the last (GPU clock), and the host's time per step
(perf_counter, no synchronisation inside the loop). These are the references a trace's step times are checked
against (tests/analyzers/test_steps_real.py).
"""
import gzip
import json
import math
import os
import shutil
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
QUICK = "--quick" in sys.argv
#: --schedule: profile with a schedule, as most users do, so that each prof.step() becomes a ProfilerStep#N range
#: (torch 2.11 writes none without one); without it steps must be found from the kernels themselves
SCHEDULE = "--schedule" in sys.argv
#: --ncu: no profiler; the decode steps run inside NVTX ranges token_N for `ncu --nvtx --nvtx-include token_8/`
NCU = "--ncu" in sys.argv
os.makedirs(OUT, exist_ok=True)
dev = "cuda"
ACTS = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
SUMMARY = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
           "workloads": {}}
try:
    import triton
    SUMMARY["triton"] = triton.__version__
except ImportError:
    pass


def profiler(steps):
    if SCHEDULE:
        return profile(activities=ACTS, record_shapes=True,
                       schedule=torch.profiler.schedule(wait=0, warmup=0, active=steps, repeat=1))
    return profile(activities=ACTS, record_shapes=True)


def save(prof, name):
    raw = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)
    return os.path.getsize(raw + ".gz")


def timed(fn, steps, stream=None):
    """The program without the profiler: CUDA events before each step and after the last, and host time per step."""
    stream = stream or torch.cuda.current_stream()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    host = []
    torch.cuda.synchronize()
    for i in range(steps):
        t = time.perf_counter()
        ev[i].record(stream)
        fn(i)
        host.append((time.perf_counter() - t) * 1e9)
    ev[steps].record(stream)
    torch.cuda.synchronize()
    gpu = [ev[i].elapsed_time(ev[i + 1]) * 1e6 for i in range(steps)]
    return {"event_step_ns": [round(x) for x in gpu], "host_step_ns": [round(x) for x in host],
            "event_step_median_ns": round(statistics.median(gpu)),
            "host_step_median_ns": round(statistics.median(host))}


# ------------------------------------------------------------------------------------------------------------
# A Llama-style decoder with a static KV cache: every decode step has the same shapes (graph- and compile-able)
# ------------------------------------------------------------------------------------------------------------
V, D, L, NH, FF, MAXLEN = 32000, 2048, 8, 16, 5632, 256
HD = D // NH
torch.manual_seed(0)


def w(*shape):
    return (torch.randn(*shape, device=dev) * 0.02).bfloat16()


emb = w(V, D)
layers = [dict(n1=torch.ones(D, device=dev, dtype=torch.bfloat16), wqkv=w(3 * D, D), wo=w(D, D),
               n2=torch.ones(D, device=dev, dtype=torch.bfloat16), wg=w(FF, D), wu=w(FF, D), wd=w(D, FF))
          for _ in range(L)]
norm_f = torch.ones(D, device=dev, dtype=torch.bfloat16)
lm_head = w(V, D)
kcache = torch.zeros(L, 1, NH, MAXLEN, HD, device=dev, dtype=torch.bfloat16)
vcache = torch.zeros_like(kcache)
inv_freq = 1.0 / (10000 ** (torch.arange(0, HD, 2, device=dev).float() / HD))
ar = torch.arange(MAXLEN, device=dev)


def rmsnorm(x, g):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g


def rope(x, pos):
    ang = pos.float() * inv_freq                      # (HD/2,)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def decode_step(tok, pos):
    """One token: tok (1,) int64, pos (1,) int64 on the GPU -> next token (1,) int64 (greedy)."""
    x = emb[tok].view(1, 1, D)
    mask = (ar <= pos).view(1, 1, 1, MAXLEN)
    for i, p in enumerate(layers):
        h = rmsnorm(x, p["n1"])
        q, k, v = F.linear(h, p["wqkv"]).view(1, 1, 3, NH, HD).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)      # (1, NH, 1, HD)
        q, k = rope(q, pos), rope(k, pos)
        kcache[i].index_copy_(2, pos, k)
        vcache[i].index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, kcache[i], vcache[i], attn_mask=mask)
        x = x + F.linear(a.transpose(1, 2).reshape(1, 1, D), p["wo"])
        h = rmsnorm(x, p["n2"])
        x = x + F.linear(F.silu(F.linear(h, p["wg"])) * F.linear(h, p["wu"]), p["wd"])
    logits = F.linear(rmsnorm(x, norm_f), lm_head)
    return logits.view(-1).argmax().view(1)


PROMPT_LEN = 32
TOKENS = 4 if QUICK else 16


def fill_prompt():
    kcache.normal_(0, 1)
    vcache.normal_(0, 1)


def run_decode(step_fn, n, prof=None, tag=None):
    """n greedy tokens from PROMPT_LEN; the token and position stay on the GPU (no host sync per token)."""
    tok = torch.tensor([1], device=dev)
    pos = torch.tensor([PROMPT_LEN], device=dev)
    for i in range(n):
        torch.cuda.nvtx.range_push(f"token_{i}")
        tok = step_fn(tok, pos)
        pos = pos + 1 if not isinstance(step_fn, GraphStep) else pos
        torch.cuda.nvtx.range_pop()
        if prof is not None:
            prof.step()
    return tok


class GraphStep:
    """decode_step captured as one CUDA graph on static inputs; a call copies its inputs in and replays."""
    def __init__(self):
        self.tok = torch.tensor([1], device=dev)
        self.pos = torch.tensor([PROMPT_LEN], device=dev)
        self.g = None

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                decode_step(self.tok, self.pos)
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.out = decode_step(self.tok, self.pos)

    def __call__(self, tok, pos):
        if self.g is None:
            self.capture()
        self.tok.copy_(tok)
        self.g.replay()
        self.pos.add_(1)
        return self.out.clone()


def decode_workload(mode):
    fill_prompt()
    if mode == "eager":
        fn = decode_step
    elif mode == "graph":
        fn = GraphStep()
    else:
        torch._dynamo.reset()
        fn = torch.compile(decode_step, mode="default", dynamic=False, fullgraph=True)
    # eager and graph are warm when profiling starts (the graph captured before); compile is cold: step 0 compiles
    if mode != "compile":
        run_decode(fn, 2)
        torch.cuda.synchronize()
    if NCU:                   # under Nsight Compute: the same steps, cold, no profiler
        run_decode(fn, TOKENS)
        torch.cuda.synchronize()
        return
    with profiler(TOKENS) as prof:
        run_decode(fn, TOKENS, prof=prof)
        torch.cuda.synchronize()
    size = save(prof, f"decode_{mode}")
    # the same program without the profiler, warm: one token per step
    state = {"tok": torch.tensor([1], device=dev), "pos": torch.tensor([PROMPT_LEN], device=dev)}
    if isinstance(fn, GraphStep):
        fn.pos.fill_(PROMPT_LEN)

    def one(i):
        state["tok"] = fn(state["tok"], state["pos"])
        if not isinstance(fn, GraphStep):
            state["pos"] = state["pos"] + 1
    ref = timed(one, TOKENS)
    t = time.perf_counter()
    run_decode(fn, TOKENS)
    torch.cuda.synchronize()
    ref["wall_per_token_ns"] = round((time.perf_counter() - t) * 1e9 / TOKENS)
    ref.update(trace_bytes=size, tokens=TOKENS, layers=L, d_model=D, ffn=FF, heads=NH, vocab=V,
               max_len=MAXLEN, prompt_len=PROMPT_LEN)
    SUMMARY["workloads"][f"decode_{mode}"] = ref
    print(mode, json.dumps({k: v for k, v in ref.items() if not isinstance(v, list)}), flush=True)


# ------------------------------------------------------------------------------------------------------------
# A GPT-style training step
# ------------------------------------------------------------------------------------------------------------
class Block(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def train_workload():
    d, h, nl, vocab, B, T = 1024, 16, 8, 32000, 8, 512
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, d), *[Block(d, h) for _ in range(nl)],
                                torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, vocab, (B, T), device=dev)
    y = torch.randint(0, vocab, (B, T), device=dev)

    def step(i):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n = 3 if QUICK else 8
    with profiler(n) as prof:
        for i in range(n):
            step(i)
            prof.step()
        torch.cuda.synchronize()
    size = save(prof, "train_step")
    ref = timed(step, n)
    ref.update(trace_bytes=size, steps=n, layers=nl, d_model=d, batch=B, seq=T, vocab=vocab)
    SUMMARY["workloads"]["train_step"] = ref
    print("train", json.dumps({k: v for k, v in ref.items() if not isinstance(v, list)}), flush=True)


# ------------------------------------------------------------------------------------------------------------
# Two streams: a busy main stream, a side stream with ten small ops
# ------------------------------------------------------------------------------------------------------------
def two_streams_workload():
    n = 4096
    a, b = torch.randn(n, n, device=dev).bfloat16(), torch.randn(n, n, device=dev).bfloat16()
    host = torch.randn(1 << 21).pin_memory()
    dbuf = torch.empty_like(host, device=dev)
    side = torch.cuda.Stream()
    iters = 10

    def it(i):
        with record_function(f"iteration_{i}"):
            for _ in range(8):
                c = a @ b
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                dbuf.copy_(host, non_blocking=True)
                dbuf.mul_(0.5)
            torch.cuda.current_stream().wait_stream(side)
            return c

    for i in range(3):
        it(i)
    torch.cuda.synchronize()
    with profile(activities=ACTS) as prof:
        for i in range(iters):
            it(i)
        torch.cuda.synchronize()
    size = save(prof, "two_streams")
    ref = timed(it, iters)
    ref.update(trace_bytes=size, steps=iters, matmul=n, matmuls_per_step=8)
    SUMMARY["workloads"]["two_streams"] = ref
    print("two_streams", json.dumps({k: v for k, v in ref.items() if not isinstance(v, list)}), flush=True)


if __name__ == "__main__":
    which = [a for a in sys.argv[2:] if not a.startswith("--")] or ["eager", "graph", "compile", "train", "two"]
    t0 = time.time()
    jobs = [(m, lambda m=m: decode_workload(m)) for m in ("eager", "graph", "compile")]
    jobs += [("train", train_workload), ("two", two_streams_workload)]
    for name, job in jobs:
        if name in which:
            try:
                job()
            except Exception as e:      # one workload failing must not lose the others' recordings
                import traceback
                traceback.print_exc()
                SUMMARY.setdefault("errors", {})[name] = repr(e)
    SUMMARY["record_seconds"] = round(time.time() - t0, 1)
    SUMMARY["profiler_schedule"] = SCHEDULE
    if NCU:
        sys.exit(0)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(SUMMARY, f, indent=1)
    print(json.dumps({k: v for k, v in SUMMARY.items() if k != "workloads"}))
