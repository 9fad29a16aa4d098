"""GPU spec registry: datasheet numbers with their sources, looked up from a device name.

Units are in the field names (bytes, bytes per second, FLOP per second, MHz). Every number of a
registry entry names its source in `sources` (field name -> source text); a field without an entry
in `sources` is sourced by `sources["*"]`. GPUs that are not in the registry are described from a
report's device attributes (`from_device_attributes`), whose source is the report itself.

More: docs/architecture.md, *analyzers.gpus*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from analyzers.errors import UnknownName


@dataclass(frozen=True)
class GPUSpec:
    name: str  # canonical, e.g. "NVIDIA H200"
    cc: tuple[int, int]  # compute capability (major, minor)
    sm_count: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int  # 32-bit registers
    max_regs_per_block: int
    max_regs_per_thread: int
    smem_per_sm_bytes: int  # largest shared-memory carve-out per SM
    smem_per_block_bytes: int  # default per-block limit (48 KiB)
    smem_per_block_optin_bytes: int  # opt-in per-block limit
    # driver-reserved shared memory per block (1 KiB on CC >= 8.0)
    reserved_smem_per_block_bytes: int
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    memory_type: str | None = None
    dram_bandwidth_bytes_per_s: float | None = None  # spec peak
    bf16_dense_flop_per_s: float | None = None  # tensor-core dense BF16, FP32 accumulate
    fp32_flop_per_s: float | None = None  # CUDA-core FP32 (FMA = 2 FLOP)
    boost_clock_mhz: float | None = None
    host_link: str | None = None  # e.g. "PCIe Gen5 x16"
    host_link_bytes_per_s: float | None = None  # one direction
    # normalised names that identify it (see _normalise)
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    from_registry: bool = True
    max_threads_per_block: int | None = None  # 1024 on every CC in scope
    # DRAM clock as ncu's "DRAM Frequency" reports it (measured)
    memory_clock_hz: float | None = None

    def source_of(self, field_name: str) -> str:
        return self.sources.get(field_name) or self.sources.get("*", "unknown source")

    @property
    def max_warps(self) -> int:
        return self.max_warps_per_sm


# ---------------------------------------------------------------------------------------------
# Per-compute-capability limits
# ---------------------------------------------------------------------------------------------

KIB = 1024
MIB = 1024 * 1024
GB = 1e9
TB = 1e12
TFLOP = 1e12

#: Fields of GPUSpec that are per-SM / per-block limits set by the compute capability.
PER_SM_FIELDS = (
    "max_threads_per_sm",
    "max_warps_per_sm",
    "max_blocks_per_sm",
    "regs_per_sm",
    "max_regs_per_block",
    "max_regs_per_thread",
    "smem_per_sm_bytes",
    "smem_per_block_bytes",
    "smem_per_block_optin_bytes",
    "reserved_smem_per_block_bytes",
    "max_threads_per_block",
)

_CC_TABLE_SOURCE = (
    "per-CC limits: CUDA Programming Guide 'Technical Specifications per Compute Capability' as "
    "tabulated in bench-anchors.md §2a; blocks/SM from cuda_occupancy.h (CUDA 13.0) "
    "cudaOccMaxBlocksPerMultiprocessor; shared memory = largest carve-out of "
    "cudaOccAlignUpShmemSizeVoltaPlus, opt-in = carve-out - 1 KiB reserved"
)


def _cc_limits(threads: int, blocks: int, smem_kib: int) -> dict[str, int]:
    """Limits shared by all CC >= 8.0 parts: 64 K registers per SM and per block, 255 registers per
    thread, 1024 threads per block, 48 KiB default per-block shared memory, 1 KiB reserved per
    block; opt-in per block = carve-out - 1 KiB."""
    return dict(
        max_threads_per_sm=threads,
        max_warps_per_sm=threads // 32,
        max_blocks_per_sm=blocks,
        regs_per_sm=65536,
        max_regs_per_block=65536,
        max_regs_per_thread=255,
        smem_per_sm_bytes=smem_kib * KIB,
        smem_per_block_bytes=48 * KIB,
        smem_per_block_optin_bytes=smem_kib * KIB - 1 * KIB,
        reserved_smem_per_block_bytes=1 * KIB,
        max_threads_per_block=1024,
    )


def _cc7_limits(threads: int, blocks: int, smem_kib: int) -> dict[str, int]:
    """CC 7.x: as _cc_limits, but no shared memory is reserved per block (reservedSharedMemPerBlock
    is 0 before CC 8.0), so the opt-in per-block limit is the whole carve-out."""
    d = _cc_limits(threads, blocks, smem_kib)
    d.update(smem_per_block_optin_bytes=smem_kib * KIB, reserved_smem_per_block_bytes=0)
    return d


def _cc6_limits(threads: int, blocks: int, smem_kib: int) -> dict[str, int]:
    """CC 6.x: no reserved shared memory, and a block may use at most 48 KB of it (no opt-in beyond)."""
    d = _cc_limits(threads, blocks, smem_kib)
    d.update(smem_per_block_optin_bytes=48 * KIB, reserved_smem_per_block_bytes=0)
    return d


_CC7_SOURCE = (
    "per-CC limits: CUDA Programming Guide 'Technical Specifications per Compute Capability' (7.0: "
    "2048 threads, 32 blocks, 96 KB shared memory per SM and per block opt-in; 7.5: 1024 threads, "
    "16 blocks, 64 KB; no reserved shared memory before CC 8.0); blocks/SM and carve-outs as "
    "cuda_occupancy.h (CUDA 13.0); agrees with the device descriptions of the compatibility corpus "
    "(tests/corpus: V100 computeProperties and ncu device attributes, T4 TARGET_INFO_GPU)"
)

#: (major, minor) -> per-SM limits. The H200 row was confirmed on a device
#: (sample_traces/h200/device_env.json: sharedMemPerMultiprocessor 233472, sharedMemPerBlockOptin
#: 232448, reservedSharedMemPerBlock 1024, regsPerMultiprocessor 65536, maxThreadsPerMultiProcessor
#: 2048, maxBlocksPerMultiProcessor 32); the others are checked against the corpus's device
#: descriptions (tests/collectors/test_corpus_formats.py).
CC_LIMITS: dict[tuple[int, int], dict[str, int]] = {
    # CC 6.1 (Pascal GeForce): 2048 threads, 32 blocks, 96 KB per SM, 48 KB per block (Programming
    # Guide); as the GTX 1080 of tests/corpus/pmkid-brute-force reports in its device attributes
    (6, 1): _cc6_limits(2048, 32, 96),
    (7, 0): _cc7_limits(2048, 32, 96),
    (7, 5): _cc7_limits(1024, 16, 64),
    (8, 0): _cc_limits(2048, 32, 164),
    (8, 7): _cc_limits(2048, 32, 164),
    (8, 6): _cc_limits(1536, 16, 100),
    (8, 9): _cc_limits(1536, 24, 100),
    (9, 0): _cc_limits(2048, 32, 228),
    (10, 0): _cc_limits(2048, 32, 228),
    (12, 0): _cc_limits(1536, 24, 100),
}


def cc_limits(cc: tuple[int, int]) -> dict[str, int] | None:
    """Per-SM limits for a compute capability, or None when the CC is not tabulated."""
    return CC_LIMITS.get(tuple(cc))


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

_PCIE4 = (
    "PCIe Gen4 x16",
    32 * GB,
    "PCIe Gen4 x16 one direction = 32 GB/s nominal (16 GT/s x 16 lanes / 8); the reference "
    "(bench-anchors.md §2b) quotes 31.5 GB/s after 128b/130b encoding; 32 chosen to match "
    "the textbook's convention",
)
_PCIE3 = (
    "PCIe Gen3 x16",
    16 * GB,
    "PCIe Gen3 x16 one direction = 16 GB/s nominal (8 GT/s x 16 lanes / 8), 15.75 GB/s after "
    "128b/130b encoding",
)
_PCIE5 = (
    "PCIe Gen5 x16",
    64 * GB,
    "PCIe Gen5 x16 one direction = 64 GB/s, the textbook's figure (Example 5-1); the reference "
    "(bench-anchors.md §2b) quotes 63 GB/s after 128b/130b encoding",
)

_ML_ENG = "NVIDIA datasheet as tabulated in stas00/ml-engineering compute/accelerator/README.md (bench-anchors.md §2b)"
_L2_MIB = "L2 '{n} MB' per bench-anchors.md §2b, read as MiB (NVIDIA cache MB are binary)"


def _entry(
    name: str,
    cc: tuple[int, int],
    *,
    sm: int,
    boost_mhz: float,
    l2_mib: float,
    mem_gb: float,
    mem_type: str,
    bw: float,
    bf16: float | None,
    fp32: float,
    link: tuple[str, float, str],
    aliases: tuple[str, ...],
    sources: dict[str, str],
    memory_clock_hz: float | None = None,
) -> GPUSpec:
    limits = CC_LIMITS[cc]
    src = {
        "*": _ML_ENG,
        "l2_bytes": _L2_MIB.format(n=f"{l2_mib:g}"),
        "memory_bytes": f"datasheet {mem_gb:g} GB (decimal) via bench-anchors.md §2b",
        "host_link": link[2],
        "host_link_bytes_per_s": link[2],
    }
    src.update(
        {
            f: (_CC7_SOURCE if cc[0] == 7 else _CC_TABLE_SOURCE) + f" (CC {cc[0]}.{cc[1]})"
            for f in PER_SM_FIELDS
        }
    )
    src.update(sources)
    return GPUSpec(
        name=name,
        cc=cc,
        sm_count=sm,
        **limits,
        l2_bytes=int(round(l2_mib * MIB)),
        memory_bytes=int(mem_gb * GB),
        memory_type=mem_type,
        dram_bandwidth_bytes_per_s=bw,
        bf16_dense_flop_per_s=bf16,
        fp32_flop_per_s=fp32,
        boost_clock_mhz=boost_mhz,
        host_link=link[0],
        host_link_bytes_per_s=link[1],
        aliases=aliases,
        sources=src,
        from_registry=True,
        memory_clock_hz=memory_clock_hz,
    )


_V100_SRC = {
    "*": "NVIDIA V100 Tensor Core GPU datasheet (80 SMs, 900 GB/s HBM2, 6 MB L2; SXM2 "
    "15.7 / PCIe 14 TFLOP/s FP32, 125 / 112 TFLOP/s FP16 tensor, no BF16 tensor cores)",
    "l2_bytes": "6 MB L2 (datasheet) read as MiB; l2_cache_size 6,291,456 B in the V100 "
    "reports of tests/corpus",
    "memory_bytes": "V100 datasheet: 16 or 32 GB HBM2 (decimal)",
    "bf16_dense_flop_per_s": "none: Volta tensor cores have no BF16 (datasheet)",
    "host_link": _PCIE3[2],
    "host_link_bytes_per_s": _PCIE3[2],
}

_H200_DEV = "measured on the project H200: sample_traces/h200/device_env.json (cupy/torch device properties)"

REGISTRY: tuple[GPUSpec, ...] = (
    _entry(
        "NVIDIA H200",
        (9, 0),
        sm=132,
        boost_mhz=1980,
        l2_mib=60,
        mem_gb=141,
        mem_type="HBM3e",
        bw=4.8 * TB,
        bf16=989 * TFLOP,
        fp32=67 * TFLOP,
        link=_PCIE5,
        aliases=("h200", "h200 sxm", "h200 sxm5", "h200 141gb hbm3e", "h200 sxm 141gb"),
        memory_clock_hz=3201e6,
        sources={
            "*": "NVIDIA H200 SXM datasheet via bench-anchors.md §2b",
            "memory_clock_hz": _H200_DEV + " memoryClockRate 3,201,000 kHz; nvidia-smi "
            "clocks.max.memory 3201 MHz; ncu 'DRAM Frequency' 3.20 GHz in "
            "sample_traces/h200/chapter5_kernels",
            "sm_count": _H200_DEV + " multiProcessorCount 132",
            "l2_bytes": _H200_DEV + " l2CacheSize 62,914,560 B (= 60 MiB)",
            "boost_clock_mhz": _H200_DEV + " clockRate 1,980,000 kHz",
            **{f: _CC_TABLE_SOURCE + "; confirmed by " + _H200_DEV for f in PER_SM_FIELDS},
        },
    ),
    _entry(
        "NVIDIA H100 SXM",
        (9, 0),
        sm=132,
        boost_mhz=1980,
        l2_mib=50,
        mem_gb=80,
        mem_type="HBM3",
        bw=3.35 * TB,
        bf16=989 * TFLOP,
        fp32=67 * TFLOP,
        link=_PCIE5,
        aliases=(
            "h100",
            "h100 sxm",
            "h100 sxm5",
            "h100 80gb hbm3",
            "h100 sxm5 80gb",
            "h100 sxm 80gb",
        ),
        sources={
            "bf16_dense_flop_per_s": "1830 MHz x 512 FMA/TC/clk x 2 x 528 TCs = 989.4 "
            "TFLOP/s (ml-engineering; bench-anchors.md §2b notes)",
            "sm_count": "deviceQuery (Johnsonms/NVIDIA-Hopper-Benchmark) via bench-anchors.md §2b",
        },
    ),
    _entry(
        "NVIDIA H100 PCIe",
        (9, 0),
        sm=114,
        boost_mhz=1755,
        l2_mib=50,
        mem_gb=80,
        mem_type="HBM2e",
        bw=2.0 * TB,
        bf16=756 * TFLOP,
        fp32=51 * TFLOP,
        link=_PCIE5,
        aliases=("h100 pcie", "h100 pcie 80gb", "h100 80gb pcie"),
        sources={
            "dram_bandwidth_bytes_per_s": "datasheet 2.0 TB/s (HBM2e; 2.039 from the 1593 "
            "MHz clock) via bench-anchors.md §2b"
        },
    ),
    _entry(
        "NVIDIA A100 SXM4 80GB",
        (8, 0),
        sm=108,
        boost_mhz=1410,
        l2_mib=40,
        mem_gb=80,
        mem_type="HBM2e",
        bw=2.039 * TB,
        bf16=312 * TFLOP,
        fp32=19.5 * TFLOP,
        link=_PCIE4,
        aliases=(
            "a100",
            "a100 sxm",
            "a100 sxm4",
            "a100 sxm4 80gb",
            "a100 sxm 80gb",
            "a100 80gb sxm4",
            "a100 80gb",
        ),
        sources={
            "dram_bandwidth_bytes_per_s": "datasheet 2,039 GB/s (1593 MHz x 2 x 640 B) via "
            "bench-anchors.md §2b notes",
            "bf16_dense_flop_per_s": "1410 MHz x 256 FMA/TC/clk x 2 x 432 TCs = 311.9 "
            "TFLOP/s, datasheet 312 (bench-anchors.md §2b notes)",
        },
    ),
    _entry(
        "NVIDIA A10G",
        (8, 6),
        sm=80,
        boost_mhz=1710,
        l2_mib=6,
        mem_gb=24,
        mem_type="GDDR6",
        bw=600 * GB,
        bf16=70 * TFLOP,
        fp32=35 * TFLOP,
        link=_PCIE4,
        aliases=("a10g",),
        sources={
            "sm_count": "third-party spec aggregator (u) via bench-anchors.md §2b; verify "
            "on the box",
            "boost_clock_mhz": "third-party spec aggregator (u) via bench-anchors.md §2b",
            "bf16_dense_flop_per_s": "approx. 70 TFLOP/s (u): 80 SMs x half-rate "
            "FP32-accumulate at ~1.7 GHz; measured torch matmul 69.5 (bench-anchors.md §2b notes)",
            "fp32_flop_per_s": "approx. 35 TFLOP/s (u) = 80 SMs x 128 FP32 x 2 x 1.71 GHz "
            "(bench-anchors.md §2b)",
        },
    ),
    _entry(
        "NVIDIA L4",
        (8, 9),
        sm=58,
        boost_mhz=2040,
        l2_mib=48,
        mem_gb=24,
        mem_type="GDDR6",
        bw=300 * GB,
        bf16=121 * TFLOP,
        fp32=30.3 * TFLOP,
        link=_PCIE4,
        aliases=("l4",),
        sources={
            f: "third-party spec aggregator (u) via bench-anchors.md §2b"
            for f in (
                "sm_count",
                "boost_clock_mhz",
                "l2_bytes",
                "bf16_dense_flop_per_s",
                "fp32_flop_per_s",
            )
        },
    ),
    _entry(
        "NVIDIA L40S",
        (8, 9),
        sm=142,
        boost_mhz=2520,
        l2_mib=96,
        mem_gb=48,
        mem_type="GDDR6",
        bw=864 * GB,
        bf16=362 * TFLOP,
        fp32=91.6 * TFLOP,
        link=_PCIE4,
        aliases=("l40s",),
        sources={
            "boost_clock_mhz": "third-party spec aggregator (u) via bench-anchors.md §2b",
            "l2_bytes": "third-party spec aggregator (u): 96 MB read as MiB, via "
            "bench-anchors.md §2b",
        },
    ),
    _entry(
        "NVIDIA GeForce RTX 4090",
        (8, 9),
        sm=128,
        boost_mhz=2520,
        l2_mib=72,
        mem_gb=24,
        mem_type="GDDR6X",
        bw=1008 * GB,
        bf16=165 * TFLOP,
        fp32=82.6 * TFLOP,
        link=_PCIE4,
        aliases=("rtx 4090", "4090"),
        sources={
            "bf16_dense_flop_per_s": "165 TFLOP/s (u): GeForce runs BF16 MMA with FP32 "
            "accumulation at half rate (330 with FP16 accumulation), bench-anchors.md §2b notes"
        },
    ),
    _entry(
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        (12, 0),
        sm=188,
        boost_mhz=2617,
        l2_mib=128,
        mem_gb=96,
        mem_type="GDDR7",
        bw=1792 * GB,
        bf16=504 * TFLOP,
        fp32=125 * TFLOP,
        link=_PCIE5,
        aliases=(
            "rtx pro 6000 blackwell workstation edition",
            "rtx pro 6000 blackwell workstation",
            "rtx pro 6000 blackwell",
            "rtx pro 6000",
            "rtx pro 6000 workstation edition",
        ),
        sources={
            "*": "NVIDIA figures via press coverage, as tabulated in bench-anchors.md §2b",
            "boost_clock_mhz": "third-party spec aggregator (u) via bench-anchors.md §2b",
            "bf16_dense_flop_per_s": "approx. 504 TFLOP/s (u): '4000 AI TOPS' FP4 sparse / "
            "8 ~ 500; hmc-tech lists 503.8 (bench-anchors.md §2b notes)",
            "fp32_flop_per_s": "125 TFLOP/s per NVIDIA (bench-anchors.md §2b)",
            "max_blocks_per_sm": "cuda_occupancy.h (CUDA 13.0) "
            "cudaOccMaxBlocksPerMultiprocessor: 24 on CC 12.x (bench-anchors.md §2a says 32 (u)); "
            "a report's device attribute overrides it",
        },
    ),
    _entry(
        "NVIDIA B200",
        (10, 0),
        sm=148,
        boost_mhz=1965,
        l2_mib=126,
        mem_gb=180,
        mem_type="HBM3e",
        bw=8.0 * TB,
        bf16=2250 * TFLOP,
        fp32=80 * TFLOP,
        link=_PCIE5,
        aliases=("b200", "b200 hgx", "hgx b200", "b200 sxm", "b200 180gb hbm3e"),
        sources={
            "memory_bytes": "180 GB usable HBM3e (192 GB physical), ml-engineering via "
            "bench-anchors.md §2b",
            "fp32_flop_per_s": "80 TFLOP/s per DGX B200 datasheet via ml-engineering (u); "
            "148 x 128 x 2 x 1.965 GHz = 74.4 derived (bench-anchors.md "
            "§2b notes)",
            "host_link": "PCIe Gen5 x16 (u, bench-anchors.md §2b); " + _PCIE5[2],
            "host_link_bytes_per_s": "PCIe Gen5 x16 (u, bench-anchors.md §2b); " + _PCIE5[2],
            "max_blocks_per_sm": "cuda_occupancy.h (CUDA 13.0): 32 on CC 10.0 "
            "(bench-anchors.md §2a marks it (u))",
        },
    ),
    # parts of the compatibility corpus (tests/corpus) whose files may not name the GPU
    _entry(
        "NVIDIA Tesla V100 SXM2 16GB",
        (7, 0),
        sm=80,
        boost_mhz=1530,
        l2_mib=6,
        mem_gb=16,
        mem_type="HBM2",
        bw=900 * GB,
        bf16=None,
        fp32=15.7 * TFLOP,
        link=_PCIE3,
        aliases=("v100 sxm2 16gb",),
        sources=_V100_SRC,
    ),
    _entry(
        "NVIDIA Tesla V100 SXM2 32GB",
        (7, 0),
        sm=80,
        boost_mhz=1530,
        l2_mib=6,
        mem_gb=32,
        mem_type="HBM2",
        bw=900 * GB,
        bf16=None,
        fp32=15.7 * TFLOP,
        link=_PCIE3,
        aliases=("v100 sxm2 32gb",),
        sources=_V100_SRC,
    ),
    _entry(
        "NVIDIA Tesla V100 PCIe 16GB",
        (7, 0),
        sm=80,
        boost_mhz=1380,
        l2_mib=6,
        mem_gb=16,
        mem_type="HBM2",
        bw=900 * GB,
        bf16=None,
        fp32=14 * TFLOP,
        link=_PCIE3,
        aliases=("v100 pcie 16gb",),
        sources=_V100_SRC,
    ),
    _entry(
        "NVIDIA T4",
        (7, 5),
        sm=40,
        boost_mhz=1590,
        l2_mib=4,
        mem_gb=16,
        mem_type="GDDR6",
        bw=320 * GB,
        bf16=None,
        fp32=8.1 * TFLOP,
        link=_PCIE3,
        aliases=("t4",),
        sources={
            "*": "NVIDIA T4 Tensor Core GPU datasheet (40 SMs, 320 GB/s "
            "GDDR6, 8.1 TFLOP/s FP32, 65 TFLOP/s FP16 tensor, no BF16 tensor cores)",
            "sm_count": "TARGET_INFO_GPU smCount 40 of "
            "tests/corpus/nsightful (a real T4 export) and the T4 datasheet",
            "l2_bytes": "4 MB L2 read as MiB: l2CacheSize 4,194,304 B in "
            "TARGET_INFO_GPU of tests/corpus/nsightful",
            "memory_bytes": "T4 datasheet: 16 GB GDDR6 (decimal)",
            "bf16_dense_flop_per_s": "none: Turing tensor cores have no BF16 (datasheet)",
        },
    ),
    _entry(
        "NVIDIA GeForce RTX 5090",
        (12, 0),
        sm=170,
        boost_mhz=2407,
        l2_mib=96,
        mem_gb=32,
        mem_type="GDDR7",
        bw=1792 * GB,
        bf16=None,
        fp32=104.8 * TFLOP,
        link=_PCIE5,
        aliases=("rtx 5090", "5090"),
        sources={
            "*": "NVIDIA GeForce RTX 5090 specifications (170 SMs, 1792 GB/s GDDR7, 32 GB, "
            "104.8 TFLOP/s FP32, boost 2.41 GHz); 1.792 TB/s also in bench-anchors.md §3",
            "l2_bytes": "96 MB L2 (GB202 as configured on the RTX 5090), read as MiB (u: "
            "no device query seen)",
            "memory_bytes": "32 GB GDDR7 (specifications, decimal)",
            "bf16_dense_flop_per_s": "not listed: GeForce BF16 tensor rate with FP32 "
            "accumulation is not published for this card",
        },
    ),
)


def all_gpus() -> list[GPUSpec]:
    """Every registry entry, in registry order."""
    return list(REGISTRY)


_DROP_WORDS = {"nvidia", "geforce", "tesla", "gpu"}


def _normalise(name: str) -> str:
    """Lower-case, punctuation to spaces, vendor words dropped: 'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb'."""
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in _DROP_WORDS)


def find_gpu(name: str) -> GPUSpec | None:
    """The registry entry whose canonical name or one of whose aliases equals `name` after
    normalisation (case-insensitive, punctuation ignored, 'NVIDIA'/'GeForce' dropped); None if none.

    Whole names are compared, never substrings, so 'H100' cannot match the H200, 'L4' cannot match
    the L40S and a variant that is not in the registry ('H100 NVL', 'A100-SXM4-40GB') is not
    mistaken for a listed one. A bare 'H100' means the H100 SXM and a bare 'A100' the A100 SXM4
    80GB.
    """
    if not name:
        return None
    key = _normalise(name)
    for gpu in REGISTRY:
        if key == _normalise(gpu.name) or key in gpu.aliases:
            return gpu
    return None


def get_gpu(name: str) -> GPUSpec:
    """Like find_gpu but raises UnknownName (a LookupError) for an unknown name, listing the known ones."""
    gpu = find_gpu(name)
    if gpu is None:
        raise UnknownName(
            "GPU",
            name,
            "known: " + ", ".join(g.name for g in REGISTRY) + "; `kernelscope gpus` lists them",
        )
    return gpu


# ---------------------------------------------------------------------------------------------
# From a report's device attributes
# ---------------------------------------------------------------------------------------------

ATTR_PREFIX = "device__attribute_"

#: GPUSpec field -> Nsight Compute device attribute (without the `device__attribute_` prefix).
ATTR_FIELDS: dict[str, str] = {
    "sm_count": "multiprocessor_count",
    "max_threads_per_sm": "max_threads_per_multiprocessor",
    "max_warps_per_sm": "max_warps_per_multiprocessor",
    "max_blocks_per_sm": "max_blocks_per_multiprocessor",
    "regs_per_sm": "max_registers_per_multiprocessor",
    "max_regs_per_block": "max_registers_per_block",
    "max_regs_per_thread": "max_registers_per_thread",
    "smem_per_sm_bytes": "max_shared_memory_per_multiprocessor",
    "smem_per_block_bytes": "max_shared_memory_per_block",
    "smem_per_block_optin_bytes": "max_shared_memory_per_block_optin",
    "reserved_smem_per_block_bytes": "reserved_shared_memory_per_block",
    "max_threads_per_block": "max_threads_per_block",
    "l2_bytes": "l2_cache_size",
    "memory_bytes": "total_memory",
}


def _num(value) -> float | None:
    """A number from an attribute value: int/float as is, strings with thousands separators parsed."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip().replace(",", "")
    if not text:
        return None
    try:
        f = float(text)
    except ValueError:
        return None
    return int(f) if f.is_integer() else f


def _int(value) -> int | None:
    n = _num(value)
    return None if n is None else int(n)


def _strip_prefix(attrs: dict) -> dict:
    return {
        (k[len(ATTR_PREFIX) :] if k.startswith(ATTR_PREFIX) else k): v for k, v in attrs.items()
    }


def from_device_attributes(attrs: dict) -> GPUSpec:
    """A GPUSpec (from_registry=False) built from Nsight Compute device attributes.

    Keys are ncu metric names without the `device__attribute_` prefix (a prefixed key is accepted
    too); values may be numbers or strings with thousands separators. Each field's source names the
    attribute. Per-SM limits missing from `attrs` are taken from the per-CC table when the compute
    capability is known (source says so); anything else unknown stays None. Peak DRAM bandwidth =
    memory_clock_rate [kHz] * 1e3 * 2 (DDR) * global_memory_bus_width [bits] / 8. Boost clock =
    clock_rate [kHz] / 1e3.
    """
    a = _strip_prefix(attrs or {})
    src = {"*": "Nsight Compute device attributes of the report"}
    major, minor = _int(a.get("compute_capability_major")), _int(a.get("compute_capability_minor"))
    cc = (major, minor) if major is not None and minor is not None else None
    table = cc_limits(cc) if cc else None
    values: dict = {}
    for fname, attr in ATTR_FIELDS.items():
        v = _int(a.get(attr))
        if v is not None:
            values[fname] = v
            src[fname] = f"device attribute {attr} (report)"
        elif table is not None and fname in table:
            values[fname] = table[fname]
            src[fname] = f"attribute {attr} absent; {_CC_TABLE_SOURCE} (CC {cc[0]}.{cc[1]})"
        else:
            values[fname] = None
    if values["max_warps_per_sm"] is None and values["max_threads_per_sm"] is not None:
        values["max_warps_per_sm"] = values["max_threads_per_sm"] // 32
        src["max_warps_per_sm"] = "max_threads_per_multiprocessor / 32 (report)"
    mem_khz, bus_bits = _num(a.get("memory_clock_rate")), _num(a.get("global_memory_bus_width"))
    bw = mem_khz * 1e3 * 2 * bus_bits / 8 if mem_khz and bus_bits else None
    if bw is not None:
        src["dram_bandwidth_bytes_per_s"] = (
            f"derived from device attributes: memory_clock_rate {mem_khz:g} kHz x 2 x "
            f"global_memory_bus_width {bus_bits:g} bit / 8"
        )
    clock_khz = _num(a.get("clock_rate"))
    if clock_khz:
        src["boost_clock_mhz"] = "device attribute clock_rate (report), kHz / 1000"
    name = a.get("display_name") or a.get("name")
    name = str(name).strip() if name else "unknown GPU"
    src["name"] = (
        "device attribute display_name (report)"
        if name != "unknown GPU"
        else "no name in the report"
    )
    return GPUSpec(
        name=name,
        cc=cc,
        **values,
        dram_bandwidth_bytes_per_s=bw,
        boost_clock_mhz=clock_khz / 1e3 if clock_khz else None,
        sources=src,
        from_registry=False,
    )


#: Fields a report's attributes override on a registry entry (facts of the device it ran on).
OVERRIDE_FIELDS = ("sm_count", *PER_SM_FIELDS, "l2_bytes", "memory_bytes")


def resolve_gpu(name: str | None, attrs: dict | None) -> GPUSpec:
    """The spec for a report's device.

    - Name in the registry: the registry entry, with every field of OVERRIDE_FIELDS (SM count,
      per-SM limits, L2, memory size) replaced by the report's device attribute where present — the
      report is the truth for the device it ran on. The overridden fields' sources name the
      attribute and, where the values differ, the registry's value ("registry had ..."). A compute
      capability that differs is overridden the same way. Datasheet peaks (bandwidth, FLOP/s) stay.
    - Otherwise: from_device_attributes(attrs).
    - UnknownName when the name is unknown and the attributes give neither a CC nor an SM count.
    """
    gpu = find_gpu(name) if name else None
    if gpu is None and attrs:
        name_attr = _strip_prefix(attrs).get("display_name")
        gpu = find_gpu(str(name_attr)) if name_attr else None
    dev = from_device_attributes(attrs) if attrs else None
    if gpu is None:
        if dev is None or (dev.cc is None and dev.sm_count is None):
            raise UnknownName(
                "GPU",
                name,
                "not in the registry and the file has no usable device attributes; known: "
                f"{', '.join(g.name for g in REGISTRY)}",
            )
        return dev
    if dev is None:
        return gpu
    changes: dict = {}
    sources = dict(gpu.sources)
    a = _strip_prefix(attrs)
    for fname in OVERRIDE_FIELDS:
        attr = ATTR_FIELDS.get(fname)
        if attr is None or _int(a.get(attr)) is None:
            continue
        new, old = getattr(dev, fname), getattr(gpu, fname)
        changes[fname] = new
        text = f"device attribute {attr} (report)"
        sources[fname] = text if new == old else f"{text}; registry had {old}"
    if dev.cc is not None and dev.cc != gpu.cc:
        changes["cc"] = dev.cc
        sources["cc"] = (
            f"device attributes compute_capability_major/minor (report); registry had {gpu.cc}"
        )
    return replace(gpu, **changes, sources=sources)


def gpu_rows() -> list[dict]:
    """One flat dict per registry GPU (tables / JSON), units in the keys, plus its sources."""
    rows = []
    for g in REGISTRY:
        rows.append(
            {
                "name": g.name,
                "cc": f"{g.cc[0]}.{g.cc[1]}",
                "sm_count": g.sm_count,
                "dram_bandwidth_bytes_per_s": g.dram_bandwidth_bytes_per_s,
                "bf16_dense_flop_per_s": g.bf16_dense_flop_per_s,
                "fp32_flop_per_s": g.fp32_flop_per_s,
                "l2_bytes": g.l2_bytes,
                "memory_bytes": g.memory_bytes,
                "memory_type": g.memory_type,
                "smem_per_sm_bytes": g.smem_per_sm_bytes,
                "smem_per_block_optin_bytes": g.smem_per_block_optin_bytes,
                "max_threads_per_sm": g.max_threads_per_sm,
                "max_blocks_per_sm": g.max_blocks_per_sm,
                "boost_clock_mhz": g.boost_clock_mhz,
                "host_link": g.host_link,
                "host_link_bytes_per_s": g.host_link_bytes_per_s,
                "sources": dict(g.sources),
            }
        )
    return rows
