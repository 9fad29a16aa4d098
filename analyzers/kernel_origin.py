"""Where a kernel comes from, from its name alone (NCCL, torch.compile's Inductor Triton kernels,
cuBLAS / CUTLASS GEMMs, cuDNN, attention, PyTorch's ATen kernels, other Triton): a hint shown next
to the name, never a verdict."""

from __future__ import annotations

import re

import polars as pl

#: where a kernel comes from, by its name (first match): a hint next to the name, never a verdict
ORIGINS = (
    ("NCCL", r"(?i)^(void )?(nccl|rccl)"),
    ("torch.compile (Inductor, Triton)", r"^triton_(poi|per|red|tem|for|fused|mm|bmm|persistent)"),
    ("cuBLAS / CUTLASS GEMM", r"(?i)(nvjet|cublas|gemm|cutlass|sm\d+_xmma|Cijk_)"),
    ("cuDNN", r"(?i)(cudnn|cask_)"),
    ("attention (flash / SDPA)", r"(?i)(flash|fmha|attention|attn)"),
    ("PyTorch (ATen)", r"at::native|at::cuda|c10::"),
    ("Triton", r"(?i)triton"),
)


def kernel_origin(names: pl.Series) -> pl.Series:
    """ORIGINS per kernel name ("other" when none matches), computed once per distinct name."""
    uniq = names.unique().to_list()
    out = {}
    for n in uniq:
        out[n] = next((label for label, pat in ORIGINS if n and re.search(pat, n)), "other")
    return names.replace_strict(out, default="other", return_dtype=pl.String)
