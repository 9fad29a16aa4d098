"""Paths of the compatibility corpus's multi-rank traces."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
DLRM = CORPUS / "param" / "dlrm_8rank"
NCCL_ARGS = CORPUS / "hta" / "a100_resnet_ddp_nccl_rank0_2024-05.json.gz"
