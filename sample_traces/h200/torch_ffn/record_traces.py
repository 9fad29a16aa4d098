"""Records the PyTorch profiler (Kineto) samples in this folder on a CUDA GPU.

Run on the project's H200 (torch 2.11+cu130, Triton 3.6) as
    python3 sample_traces/h200/torch_ffn/record_traces.py OUTDIR
Traces: the Qwen3-8B FFN (H 4096, F 12288, BF16) at M = 1024 and M = 1 eagerly, three M = 1 FFN calls
captured in one CUDA graph and replayed, and a small Triton kernel launched many times.
"""
import gzip, json, os, shutil, sys, time

import torch
import triton
import triton.language as tl
from torch.profiler import ProfilerActivity, profile

H, F = 4096, 12288
out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
os.makedirs(out_dir, exist_ok=True)
dev = "cuda"
torch.manual_seed(0)
Wg = (torch.randn(H, F, device=dev) * 0.02).bfloat16()
Wu = (torch.randn(H, F, device=dev) * 0.02).bfloat16()
Wd = (torch.randn(F, H, device=dev) * 0.02).bfloat16()


def ffn(x):
    return (torch.nn.functional.silu(x @ Wg) * (x @ Wu)) @ Wd


def check(M):
    x = torch.randn(M, H, device=dev).bfloat16()
    ref = (torch.nn.functional.silu(x.double() @ Wg.double()) * (x.double() @ Wu.double())) @ Wd.double()
    rel = ((ffn(x).double() - ref).norm() / ref.norm()).item()
    assert rel < 2e-2, f"FFN M={M}: relative error {rel}"
    return rel


def save(prof, name):
    raw = os.path.join(out_dir, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
summary = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(0), "checks": {}}

for M, iters in ((1024, 5), (1, 20)):
    summary["checks"][f"ffn_M{M}_rel_error"] = check(M)
    x = torch.randn(M, H, device=dev).bfloat16()
    for _ in range(3):
        ffn(x)
    torch.cuda.synchronize()
    with profile(activities=acts, record_shapes=True) as prof:
        for _ in range(iters):
            ffn(x)
        torch.cuda.synchronize()
    save(prof, f"ffn_M{M}_eager")

# three M = 1 FFN calls in one CUDA graph, replayed
xs = torch.randn(1, H, device=dev).bfloat16()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        ffn(xs)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y1 = ffn(xs)
    y2 = ffn(xs)
    y3 = ffn(xs)
g.replay(); torch.cuda.synchronize()
ref = ffn(xs)
assert torch.allclose(y3.float(), ref.float(), rtol=2e-2, atol=1e-3), "graph replay result differs from eager"
with profile(activities=acts, record_shapes=True) as prof:
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
save(prof, "ffn_M1_graph")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


n = 1 << 16
a = torch.randn(n, device=dev); b = torch.randn(n, device=dev); o = torch.empty_like(a)
grid = (triton.cdiv(n, 1024),)
add_kernel[grid](a, b, o, n, BLOCK=1024); torch.cuda.synchronize()
assert torch.equal(o, a + b)
with profile(activities=acts) as prof:
    for _ in range(300):
        add_kernel[grid](a, b, o, n, BLOCK=1024)
    torch.cuda.synchronize()
save(prof, "triton_add_x300")
summary["files"] = sorted(f for f in os.listdir(out_dir) if f.endswith(".json.gz"))
with open(os.path.join(out_dir, "record_summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(json.dumps(summary))
