"""One training step of a small BF16 transformer-style block (attention-free: LayerNorm, MLP with GELU, a
residual, cross-entropy over a 8192-word head), forward + backward + fused AdamW, repeated; every step inside an
NVTX push/pop range "step_<i>", an NVTX start/end range "whole_step_<i>" and a torch.profiler step.

    python3 train_step.py trace OUTDIR     # PyTorch profiler trace of steps 4..8 -> OUTDIR/train_step_trace.json.gz
    python3 train_step.py plain OUTDIR     # no profiler (for Nsight Compute: ncu --nvtx --nvtx-include "step_6/"
                                           # or the whole step: --nvtx-include "whole_step_6")

Every step's loss is checked to be finite and decreasing over the run; the parameters' gradients are checked
against float64 on step 0 (relative error < 5e-2 in BF16).
"""
import gzip
import json
import os
import shutil
import sys

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

mode, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
dev = "cuda"
B, H, F, V = 4096, 1024, 4096, 8192


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        self.up = nn.Linear(H, F)
        self.down = nn.Linear(F, H)
        self.head = nn.Linear(H, V)

    def forward(self, x):
        h = x + self.down(nn.functional.gelu(self.up(self.norm(x))))
        return self.head(h)


model = Block().to(dev, torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
x = torch.randn(B, H, device=dev, dtype=torch.bfloat16)
target = torch.randint(0, V, (B,), device=dev)


def step(i):
    # two NVTX ranges per step: a push/pop range (per host thread: the backward pass, which autograd runs on its
    # own thread, is outside it) and a start/end range (process-wide: the whole step)
    whole = torch.cuda.nvtx.range_start(f"whole_step_{i}")
    torch.cuda.nvtx.range_push(f"step_{i}")
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x).float(), target)
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_end(whole)
    return loss


# check the gradients of step 0 against float64 before anything is timed or profiled
ref = Block().to(dev, torch.float64)
ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
lref = nn.functional.cross_entropy(ref(x.double()), target)
lref.backward()
l0 = nn.functional.cross_entropy(model(x).float(), target)
l0.backward()
for (n, p), q in zip(model.named_parameters(), ref.parameters()):
    rel = ((p.grad.double() - q.grad).norm() / q.grad.norm()).item()
    assert rel < 5e-2, f"gradient of {n}: relative error {rel:.3g}"
opt.zero_grad(set_to_none=True)
del ref

losses = []
if mode == "trace":
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=3, active=5), record_shapes=True) as prof:
        for i in range(9):
            losses.append(step(i).item())
            prof.step()
    raw = os.path.join(out, "train_step_trace.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)
else:
    for i in range(9):
        losses.append(step(i).item())
torch.cuda.synchronize()
assert all(l == l and abs(l) < 1e4 for l in losses), losses
assert losses[-1] < losses[0], f"loss did not decrease: {losses}"
with open(os.path.join(out, f"losses_{mode}.json"), "w") as f:
    json.dump({"mode": mode, "losses": losses, "torch": torch.__version__, "cuda": torch.version.cuda,
               "gpu": torch.cuda.get_device_name(0), "B": B, "H": H, "F": F, "V": V}, f, indent=1)
print(mode, "losses", [round(l, 4) for l in losses])
