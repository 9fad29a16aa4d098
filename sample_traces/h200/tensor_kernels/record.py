"""Tensor-core kernels for the Nsight Compute samples in this folder: cuBLAS matmuls in BF16, FP16 and TF32
(4096 x 4096 x 4096) and torch SDPA's flash-attention forward (BF16, causal), plus one FP32 CUDA-core kernel.
Each output is checked against a float64 reference first; only the calls inside the NVTX range "profile" are
profiled. Run on the project's H200 (CUDA 13.0, driver 580, torch 2.11, Nsight Compute 2025.3.1) by record.sh.
Writes expected.json: the FLOP each profiled call must do (2 M N K for a matmul)."""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

out = sys.argv[1] if len(sys.argv) > 1 else "."
n = 4096
dev = torch.device("cuda")
torch.manual_seed(0)


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


calls = {}
for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("tf32", torch.float32)):
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    calls[name] = (a, b)
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    err = rel(a[:256] @ b, a[:256].double() @ b.double())
    assert err < 1e-2, (name, err)
q, k, v = (torch.randn(1, 8, 4096, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
with sdpa_kernel([SDPBackend.MATH]):
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
assert rel(o, ref) < 1e-2
x = torch.rand(1 << 26, device=dev)
torch.cuda.synchronize()

torch.cuda.nvtx.range_push("profile")
for name, (a, b) in calls.items():
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    torch.matmul(a, b)
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    F.scaled_dot_product_attention(q, k, v, is_causal=True)
torch.mul(x, 1.0001)
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()

L, d, h = 4096, 128, 8
expected = {"matmul_flop": 2 * n ** 3, "order": ["bf16 matmul", "fp16 matmul", "tf32 matmul", "flash attention fwd",
                                                  "fp32 mul"],
            "attention_flop_causal": h * 2 * 2 * L * L * d // 2, "mul_elements": 1 << 26}
json.dump(expected, open(f"{out}/expected.json", "w"), indent=1)
print(json.dumps(expected))
