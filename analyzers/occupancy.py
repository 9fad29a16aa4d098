"""Theoretical occupancy: a pure-Python port of `cudaOccMaxActiveBlocksPerMultiprocessor`.

More: docs/architecture.md, *analyzers.occupancy*.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.gpus import GPUSpec

WARP_SIZE = 32
REG_ALLOC_GRANULARITY = 256  # registers, per warp, CC 3.x-12.x
SUB_PARTITIONS = 4  # per SM, CC 7.x-12.x
UNLIMITED = 2**31 - 1  # INT_MAX, what the header reports for "no limit"
LIMIT_NAMES = ("warps", "blocks", "registers", "shared_mem", "barriers")

KIB = 1024
_CARVEOUTS_VOLTA = (0, 8, 16, 32, 64, 96)
_CARVEOUTS_TURING = (32, 64)
_CARVEOUTS_164 = (0, 8, 16, 32, 64, 100, 132, 164)
_CARVEOUTS_100 = (0, 8, 16, 32, 64, 100)
_CARVEOUTS_228 = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _check_cc(cc: tuple[int, int]) -> tuple[int, int]:
    major, minor = cc
    if not 7 <= major <= 12:
        raise ValueError(
            f"compute capability {major}.{minor} is not covered by the occupancy rules (7.0-12.x)"
        )
    return major, minor


def max_blocks_per_sm_for_cc(cc: tuple[int, int]) -> int:
    """Max resident blocks per SM (cudaOccMaxBlocksPerMultiprocessor): 7.5 -> 16, other 7.x -> 32;
    8.0 -> 32, 8.9 -> 24, other 8.x -> 16; 9.x -> 32; 10.1 -> 24, other 10.x -> 32;
    11.0 -> 24, other 11.x -> 32; 12.x -> 24."""
    major, minor = _check_cc(cc)
    if major == 7:
        return 16 if minor == 5 else 32
    if major == 8:
        return 32 if minor == 0 else 24 if minor == 9 else 16
    if major == 9:
        return 32
    if major == 10:
        return 24 if minor == 1 else 32
    if major == 11:
        return 24 if minor == 0 else 32
    return 24  # 12.x


def smem_granularity_bytes(cc: tuple[int, int]) -> int:
    """Shared-memory allocation granularity per block: 256 B on CC 7.x, 128 B on CC 8-12."""
    major, _ = _check_cc(cc)
    return 256 if major == 7 else 128


def smem_carveouts_bytes(cc: tuple[int, int]) -> tuple[int, ...]:
    """Supported shared-memory carve-outs per SM (cudaOccAlignUpShmemSizeVoltaPlus), in bytes:
    7.0: 0..96 KiB; 7.5: 32, 64 KiB; 8.0/8.7: 0..164 KiB; other 8.x: 0..100 KiB; 9.x and
    10.0/10.1/10.3 and 11.0/11.1/11.3: 0..228 KiB; 12.0/12.1: 0..100 KiB."""
    major, minor = _check_cc(cc)
    if major == 7:
        kib = _CARVEOUTS_TURING if minor == 5 else _CARVEOUTS_VOLTA
    elif major == 8:
        kib = _CARVEOUTS_164 if minor in (0, 7) else _CARVEOUTS_100
    elif major == 9:
        kib = _CARVEOUTS_228
    elif major in (10, 11):
        if minor not in (0, 1, 3):
            raise ValueError(
                f"compute capability {major}.{minor}: no shared-memory carve-out table"
            )
        kib = _CARVEOUTS_228
    else:
        if minor not in (0, 1):
            raise ValueError(
                f"compute capability {major}.{minor}: no shared-memory carve-out table"
            )
        kib = _CARVEOUTS_100
    return tuple(k * KIB for k in kib)


def align_up_carveout(size_bytes: int, cc: tuple[int, int]) -> int:
    """The smallest supported carve-out >= size_bytes; ValueError above the largest."""
    for step in smem_carveouts_bytes(cc):
        if size_bytes <= step:
            return step
    raise ValueError(
        f"{size_bytes} B of shared memory exceeds the largest carve-out of CC {cc[0]}.{cc[1]}"
    )


def barrier_multiplier(cc: tuple[int, int]) -> int:
    """Barriers available per SM = blockLimit * this: 2 on 8.0, 9.x, 10.x except 10.1, 11.x except
    11.0 (and 7.x); 1 on other 8.x, 10.1, 11.0, 12.x."""
    major, minor = _check_cc(cc)
    if major == 8:
        return 2 if minor == 0 else 1
    if major == 10:
        return 1 if minor == 1 else 2
    if major == 11:
        return 1 if minor == 0 else 2
    if major == 12:
        return 1
    return 2  # 7.x, 9.x


@dataclass(frozen=True)
class OccupancyResult:
    blocks_per_sm: int
    warps_per_block: int
    active_warps_per_sm: int
    occupancy_pct: float  # active warps / max warps per SM * 100
    limiters: tuple[str, ...]  # every limit equal to the minimum, from LIMIT_NAMES
    limits: dict[str, int]  # blocks/SM allowed by each resource (UNLIMITED for "no limit")
    smem_per_sm_bytes: int  # the carve-out used
    smem_per_block_alloc_bytes: int


def _roundup(x: int, g: int) -> int:
    return -(-x // g) * g


_REQUIRED = (
    "cc",
    "max_threads_per_sm",
    "regs_per_sm",
    "max_regs_per_block",
    "max_regs_per_thread",
    "smem_per_sm_bytes",
    "smem_per_block_bytes",
    "smem_per_block_optin_bytes",
    "reserved_smem_per_block_bytes",
)


def occupancy(
    gpu: GPUSpec,
    block_size: int,
    regs_per_thread: int,
    smem_static_bytes: int = 0,
    smem_dynamic_bytes: int = 0,
    *,
    smem_config_bytes: int | None = None,
    carveout_pct: int | None = None,
    opt_in: bool | None = None,
    barriers_per_block: int = 1,
) -> OccupancyResult:
    """Resident blocks and warps per SM for one kernel launch on `gpu` (theoretical occupancy).

    Shared memory per block: alloc = roundup(smem_static + reserved + smem_dynamic, granularity).
    Per-block cap: `opt_in=False` -> default limit (48 KiB); `opt_in=True` -> opt-in limit;
    `opt_in=None` -> opt in only when static + reserved + dynamic exceeds the default limit (what a
    kernel must do to launch with that much); on CC >= 8 the cap is raised by the reserved bytes. A
    block over the cap gets shared_mem limit 0 (it cannot launch).

    The SM's shared-memory capacity:
    - `smem_config_bytes` (ncu's `launch__shared_mem_config_size`, the carve-out the driver chose)
      when given — this is how Nsight Compute's theoretical occupancy is computed;
    - else the preference `carveout_pct * smem_per_sm / 100` (integer), or `smem_per_sm` when None
      (the API default), rounded up to the next supported carve-out of the CC;
    - if the preference is smaller than one block's alloc, alloc rounded up to the next carve-out.

    Raises ValueError for block_size <= 0 or > max threads per block, negative sizes or counts,
    regs_per_thread > the GPU's max, carveout_pct outside 0..100, both smem_config_bytes and
    carveout_pct, a GPU spec missing a needed limit, or a CC outside 7.0-12.x.
    """
    missing = [f for f in _REQUIRED if getattr(gpu, f) is None]
    if missing:
        raise ValueError(
            f"GPU spec {gpu.name!r} lacks {', '.join(missing)}; cannot compute occupancy"
        )
    cc = _check_cc(gpu.cc)
    max_tpb = gpu.max_threads_per_block or 1024
    if block_size <= 0 or block_size > max_tpb or int(block_size) != block_size:
        raise ValueError(f"block_size must be 1..{max_tpb} threads, got {block_size!r}")
    if regs_per_thread < 0 or regs_per_thread > gpu.max_regs_per_thread:
        raise ValueError(
            f"regs_per_thread must be 0..{gpu.max_regs_per_thread}, got {regs_per_thread}"
        )
    for label, v in (
        ("smem_static_bytes", smem_static_bytes),
        ("smem_dynamic_bytes", smem_dynamic_bytes),
        ("barriers_per_block", barriers_per_block),
    ):
        if v < 0:
            raise ValueError(f"{label} must be >= 0, got {v}")
    if smem_config_bytes is not None and carveout_pct is not None:
        raise ValueError("give smem_config_bytes or carveout_pct, not both")
    if smem_config_bytes is not None and smem_config_bytes < 0:
        raise ValueError(f"smem_config_bytes must be >= 0, got {smem_config_bytes}")
    if carveout_pct is not None and not 0 <= carveout_pct <= 100:
        raise ValueError(f"carveout_pct must be 0..100, got {carveout_pct}")

    max_warps = gpu.max_threads_per_sm // WARP_SIZE
    warps = -(-block_size // WARP_SIZE)
    limits: dict[str, int] = {}

    # warps
    limits["warps"] = max_warps // warps
    # blocks
    block_limit = max_blocks_per_sm_for_cc(cc)
    limits["blocks"] = block_limit
    # registers
    regs_per_warp = _roundup(regs_per_thread * WARP_SIZE, REG_ALLOC_GRANULARITY)
    if regs_per_warp == 0:
        limits["registers"] = UNLIMITED
    elif (
        regs_per_warp * _roundup(warps, SUB_PARTITIONS) > gpu.max_regs_per_block
        or regs_per_warp * warps > gpu.max_regs_per_block
    ):
        limits["registers"] = 0
    else:
        warps_per_sub = (gpu.regs_per_sm // SUB_PARTITIONS) // regs_per_warp
        limits["registers"] = warps_per_sub * SUB_PARTITIONS // warps
    # shared memory
    reserved = gpu.reserved_smem_per_block_bytes
    need = smem_static_bytes + reserved + smem_dynamic_bytes
    alloc = _roundup(need, smem_granularity_bytes(cc))
    use_optin = opt_in if opt_in is not None else need > gpu.smem_per_block_bytes
    cap = gpu.smem_per_block_optin_bytes if use_optin else gpu.smem_per_block_bytes
    if cc[0] >= 8:
        cap += reserved
    if smem_config_bytes is not None:
        preference = smem_config_bytes
    else:
        pref = (
            gpu.smem_per_sm_bytes
            if carveout_pct is None
            else carveout_pct * gpu.smem_per_sm_bytes // 100
        )
        preference = align_up_carveout(pref, cc)
    smem_per_sm = preference
    if alloc > cap:
        limits["shared_mem"] = 0
    else:
        if preference < alloc:
            smem_per_sm = align_up_carveout(alloc, cc)
        limits["shared_mem"] = smem_per_sm // alloc if alloc > 0 else UNLIMITED
    # barriers
    if cc[0] >= 9 and barriers_per_block > 0:
        limits["barriers"] = block_limit * barrier_multiplier(cc) // barriers_per_block
    else:
        limits["barriers"] = UNLIMITED

    blocks = min(limits.values())
    limiters = tuple(k for k in LIMIT_NAMES if limits[k] == blocks)
    return OccupancyResult(
        blocks_per_sm=blocks,
        warps_per_block=warps,
        active_warps_per_sm=blocks * warps,
        occupancy_pct=blocks * warps / max_warps * 100.0,
        limiters=limiters,
        limits=limits,
        smem_per_sm_bytes=smem_per_sm,
        smem_per_block_alloc_bytes=alloc,
    )
