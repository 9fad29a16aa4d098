"""Occupancy calculator: hand-worked cases per CC, and agreement with Nsight Compute on the real H200 export."""

from __future__ import annotations

import csv
import gzip
from dataclasses import replace

import pytest

from analyzers.gpus import GPUSpec, from_device_attributes, get_gpu, resolve_gpu
from analyzers.occupancy import (
    UNLIMITED,
    align_up_carveout,
    barrier_multiplier,
    max_blocks_per_sm_for_cc,
    occupancy,
    smem_granularity_bytes,
)
from tests.conftest import H200_KERNELS

KIB = 1024
PREFIX = "device__attribute_"


# ------------------------------------------------------------------------------------------------
# Real data: Nsight Compute 2025.3.1 export of 9 kernels on the project H200 (base units)
# ------------------------------------------------------------------------------------------------


def read_raw_csv(path) -> list[dict[str, str]]:
    """ncu --page raw --csv: row 0 = metric names, row 1 = units, then one row per kernel."""
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[2:]]


def num(text: str) -> float:
    return float(text.replace(",", ""))


KERNELS = read_raw_csv(H200_KERNELS / "full_raw_base.csv.gz")


def _attrs(row: dict[str, str]) -> dict[str, str]:
    return {k[len(PREFIX) :]: v for k, v in row.items() if k.startswith(PREFIX)}


def _occ_from_row(gpu: GPUSpec, row: dict[str, str]):
    i = lambda k: int(num(row[k]))  # noqa: E731
    return occupancy(
        gpu,
        i("launch__block_size"),
        i("launch__registers_per_thread"),
        i("launch__shared_mem_per_block_static"),
        i("launch__shared_mem_per_block_dynamic"),
        smem_config_bytes=i("launch__shared_mem_config_size"),
        barriers_per_block=i("launch__barrier_count"),
    )


def test_export_has_the_nine_kernels():
    assert [r["Kernel Name"] for r in KERNELS] == [
        "ks_copy_u4",
        "ks_transpose16",
        "ks_transpose16_pad",
        "ks_transpose32",
        "ks_transpose32_pad",
        "ks_colread4",
        "ks_colread4",
        "ks_matmul_64x64",
        "ks_matmul_128x128",
    ]


SPECS = {
    "registry": lambda row: get_gpu("NVIDIA H200"),
    "attributes": lambda row: from_device_attributes(_attrs(row)),
    "resolved": lambda row: resolve_gpu(row["device__attribute_display_name"], _attrs(row)),
}


@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize(
    "idx", range(len(KERNELS)), ids=lambda i: f"{i}-{KERNELS[i]['Kernel Name']}"
)
def test_agrees_with_nsight_compute_on_every_h200_kernel(idx, spec):
    row = KERNELS[idx]
    r = _occ_from_row(SPECS[spec](row), row)
    assert r.occupancy_pct == pytest.approx(
        num(row["sm__maximum_warps_per_active_cycle_pct"]), abs=1e-9
    )
    assert r.active_warps_per_sm == num(row["sm__maximum_warps_avg_per_active_cycle"])
    for ours, theirs in (
        ("registers", "registers"),
        ("shared_mem", "shared_mem"),
        ("warps", "warps"),
        ("blocks", "blocks"),
    ):
        assert r.limits[ours] == num(row[f"launch__occupancy_limit_{theirs}"]), ours
    # ncu reports the barrier limit capped at the block limit (32 with 0 or 1 barriers); the
    # header's own value is 2 x 32 / barriers = 64 on CC 9.0, or unlimited with no barrier.
    assert min(r.limits["barriers"], r.limits["blocks"]) == num(
        row["launch__occupancy_limit_barriers"]
    )
    assert r.smem_per_block_alloc_bytes == num(row["launch__shared_mem_per_block_allocated"])
    assert r.smem_per_sm_bytes == num(row["launch__shared_mem_config_size"])
    assert r.warps_per_block * 32 == num(row["launch__block_size"])


def test_h200_kernel_values_worked_by_hand():
    # ks_matmul_128x128: 256 threads, 100 regs, 32 KiB static, 132 KiB config, 1 barrier
    #   warps 64/8 = 8; regs 100*32 = 3200 -> 3328/warp, 16384/3328 = 4 per sub-partition -> 16
    # warps / 8 = 2;
    #   smem 32768 + 1024 = 33792 B, 135168 / 33792 = 4; blocks 32  -> 2 blocks, 16 warps, 25 %.
    r = _occ_from_row(get_gpu("H200"), KERNELS[8])
    assert (r.blocks_per_sm, r.active_warps_per_sm, r.occupancy_pct, r.limiters) == (
        2,
        16,
        25.0,
        ("registers",),
    )
    # ks_copy_u4: 40 regs -> 1280/warp, 12 per sub-partition -> 48 warps / 8 = 6 blocks = 75 %; no
    # barrier
    r = _occ_from_row(get_gpu("H200"), KERNELS[0])
    assert (r.blocks_per_sm, r.occupancy_pct, r.limits["barriers"]) == (6, 75.0, UNLIMITED)


def test_ncu_config_vs_api_default_carveout():
    # ks_copy_u4 (1 KiB per block incl. reserved): the driver chose a 32 KiB carve-out -> smem limit
    # 32; the API default assumes the maximum carve-out (228 KiB) -> 228 blocks by smem.
    row = KERNELS[0]
    r = occupancy(get_gpu("H200"), 256, 40)
    assert r.smem_per_sm_bytes == 233472 and r.limits["shared_mem"] == 228
    assert _occ_from_row(get_gpu("H200"), row).limits["shared_mem"] == 32


# ------------------------------------------------------------------------------------------------
# Hand-worked cases per compute capability
# ------------------------------------------------------------------------------------------------


def test_cc80_a100_registers_and_shared_memory_tie():
    # 256 threads (8 warps), 64 regs, 40 KiB static: warps 64/8 = 8; regs 64*32 = 2048/warp,
    # 16384/2048 = 8 per sub-partition -> 32 warps / 8 = 4; smem 40960 + 1024 = 41984 B (328 x 128),
    # 164 KiB = 167936 / 41984 = 4; blocks 32 -> 4 blocks, 32 warps, 50 %, limited by registers and
    # shared memory together.
    r = occupancy(get_gpu("A100"), 256, 64, smem_static_bytes=40 * KIB)
    assert r.limits == {
        "warps": 8,
        "blocks": 32,
        "registers": 4,
        "shared_mem": 4,
        "barriers": UNLIMITED,
    }
    assert (r.blocks_per_sm, r.active_warps_per_sm, r.occupancy_pct) == (4, 32, 50.0)
    assert r.limiters == ("registers", "shared_mem")
    assert r.smem_per_block_alloc_bytes == 41984 and r.smem_per_sm_bytes == 167936


def test_cc86_a10g_block_limit_16():
    # 64 threads (2 warps), 32 regs, no shared memory (1 KiB reserved still allocated): warps 48/2 =
    # 24; regs 1024/warp, 16 per sub-partition -> 64 / 2 = 32; smem 102400/1024 = 100; blocks 16 (CC
    # 8.6) -> 16 blocks, 32 of 48 warps = 66.7 %.
    r = occupancy(get_gpu("NVIDIA A10G"), 64, 32)
    assert r.limits == {
        "warps": 24,
        "blocks": 16,
        "registers": 32,
        "shared_mem": 100,
        "barriers": UNLIMITED,
    }
    assert r.blocks_per_sm == 16 and r.limiters == ("blocks",)
    assert r.occupancy_pct == pytest.approx(200 / 3)


@pytest.mark.parametrize("name", ["NVIDIA L4", "NVIDIA GeForce RTX 4090"])
def test_cc89_registers_then_carveout(name):
    # 96 threads (3 warps), 72 regs, 9000 B static: warps 48/3 = 16; regs 72*32 = 2304/warp (9 x
    # 256), 16384/2304 = 7 per sub-partition -> 28/3 = 9; smem 9000 + 1024 = 10024 -> 10112 B (79 x
    # 128), 102400/10112 = 10; blocks 24 -> 9 blocks, 27 warps, 56.25 %.
    gpu = get_gpu(name)
    r = occupancy(gpu, 96, 72, smem_static_bytes=9000)
    assert r.limits["registers"] == 9 and r.limits["shared_mem"] == 10 and r.limits["blocks"] == 24
    assert (r.blocks_per_sm, r.active_warps_per_sm, r.occupancy_pct, r.limiters) == (
        9,
        27,
        56.25,
        ("registers",),
    )
    assert r.smem_per_block_alloc_bytes == 10112
    # carve-out 25 %: 25 x 102400 / 100 = 25600 B -> next step 32 KiB; 32768/10112 = 3 blocks = 9
    # warps = 18.75 %
    r = occupancy(gpu, 96, 72, smem_static_bytes=9000, carveout_pct=25)
    assert r.smem_per_sm_bytes == 32768
    assert (r.blocks_per_sm, r.occupancy_pct, r.limiters) == (3, 18.75, ("shared_mem",))


def test_cc90_h100_textbook_block():
    # The chapter's block on an H100 SM: 128x128 tile, K step 64 -> A 16 KiB + W 16 KiB + FP32 acc
    # 64 KiB = 96 KiB of shared memory (dynamic, opted in since > 48 KiB), 256 threads = 8 warps.
    # smem: 98304 + 1024 reserved = 99328 B (776 x 128); cap = opt-in 232448 + 1024 = 233472 ->
    # fits; 228 KiB = 233472 / 99328 = 2.35 -> 2 blocks (2 x 97 KiB = 194 KiB; a third needs 291
    # KiB) warps 64/8 = 8; blocks 32; registers: the text gives none; at 64 regs 2048/warp -> 8 per
    # sub-partition -> 32 warps / 8 = 4. -> 2 blocks = 16 resident warps of 64 = 25 % occupancy,
    # limited by shared memory.
    a_tile, w_tile, acc = 128 * 64 * 2, 64 * 128 * 2, 128 * 128 * 4
    assert a_tile + w_tile + acc == 96 * KIB
    h100 = get_gpu("H100 SXM")
    r = occupancy(h100, 256, 64, smem_dynamic_bytes=a_tile + w_tile + acc)
    assert r.limits == {"warps": 8, "blocks": 32, "registers": 4, "shared_mem": 2, "barriers": 64}
    assert (r.blocks_per_sm, r.active_warps_per_sm, r.occupancy_pct, r.limiters) == (
        2,
        16,
        25.0,
        ("shared_mem",),
    )
    assert r.smem_per_block_alloc_bytes == 99328 and r.smem_per_sm_bytes == 233472
    # Without opting in (the 48 KiB default cap, as Kineto's estimate assumes) the block cannot
    # launch.
    r = occupancy(h100, 256, 64, smem_dynamic_bytes=96 * KIB, opt_in=False)
    assert (r.blocks_per_sm, r.occupancy_pct, r.limits["shared_mem"]) == (0, 0.0, 0)
    # A 50 % carve-out preference: 116736 B -> next step 132 KiB = 135168 -> only 1 block (12.5 %).
    r = occupancy(h100, 256, 64, smem_dynamic_bytes=96 * KIB, carveout_pct=50)
    assert (r.smem_per_sm_bytes, r.blocks_per_sm, r.occupancy_pct) == (135168, 1, 12.5)


def _tile_bytes(m: int, n: int, k: int) -> int:
    """On-chip need of an m x n output tile with K step k: 2mk (A, BF16) + 2kn (W, BF16) + 4mn (FP32 acc)."""
    return 2 * m * k + 2 * k * n + 4 * m * n


@pytest.mark.parametrize("m, n, resident", [(64, 64, 4), (64, 128, 2), (128, 128, 1)])
def test_cc120_rtx_pro_6000_example_5_3(m, n, resident):
    # Example 5-3 on an RTX PRO 6000 SM (100 KiB, +1 KiB reserved per block), k = 32: 64x64: 24 KiB
    # + 1 = 25 KiB -> 102400/25600 = 4; 64x128 (Experiment 5-1): 44 + 1 = 45 KiB -> 2; 128x128: 80 +
    # 1 = 81 KiB -> 1 (needs the 99 KiB opt-in). 256 threads, 32 regs: warps 48/8 = 6, registers
    # 64/8 = 8, blocks 24 (CC 12.x) -> shared memory limits.
    gpu = get_gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    smem = _tile_bytes(m, n, 32)
    r = occupancy(gpu, 256, 32, smem_dynamic_bytes=smem)
    assert r.smem_per_block_alloc_bytes == smem + 1024
    assert r.limits["shared_mem"] == resident and r.blocks_per_sm == resident
    assert r.limiters == ("shared_mem",)
    assert r.limits["warps"] == 6 and r.limits["registers"] == 8 and r.limits["blocks"] == 24
    assert r.occupancy_pct == pytest.approx(resident * 8 / 48 * 100)


# ------------------------------------------------------------------------------------------------
# Individual rules
# ------------------------------------------------------------------------------------------------


def test_block_limit_table():
    table = {
        (7, 0): 32,
        (7, 5): 16,
        (8, 0): 32,
        (8, 6): 16,
        (8, 7): 16,
        (8, 9): 24,
        (9, 0): 32,
        (10, 0): 32,
        (10, 1): 24,
        (10, 3): 32,
        (11, 0): 24,
        (12, 0): 24,
        (12, 1): 24,
    }
    assert {cc: max_blocks_per_sm_for_cc(cc) for cc in table} == table
    assert {
        cc: barrier_multiplier(cc) for cc in [(8, 0), (8, 6), (9, 0), (10, 0), (10, 1), (12, 0)]
    } == {(8, 0): 2, (8, 6): 1, (9, 0): 2, (10, 0): 2, (10, 1): 1, (12, 0): 1}


def test_carveout_steps_round_up():
    assert align_up_carveout(0, (9, 0)) == 0
    assert align_up_carveout(1, (9, 0)) == 8 * KIB
    assert align_up_carveout(101 * KIB, (9, 0)) == 132 * KIB
    assert align_up_carveout(101 * KIB, (8, 0)) == 132 * KIB
    assert align_up_carveout(0, (7, 5)) == 32 * KIB
    with pytest.raises(ValueError):
        align_up_carveout(101 * KIB, (8, 6))
    with pytest.raises(ValueError):
        align_up_carveout(229 * KIB, (9, 0))


def test_zero_carveout_preference_grows_to_fit_one_block():
    # carve-out 0 %: preference 0 B < 1 KiB alloc -> alloc rounded up to the next step (8 KiB) -> 8
    # blocks
    r = occupancy(get_gpu("H200"), 32, 16, carveout_pct=0)
    assert r.smem_per_sm_bytes == 8 * KIB and r.limits["shared_mem"] == 8


def test_register_hardware_check_rounds_warps_to_four():
    h = get_gpu("H200")
    # 224 regs -> 7168/warp; 9 warps: 7168 x 9 = 64512 fits 65536, but the hardware check uses
    # roundup(9, 4) = 12 warps: 86016 > 65536 -> cannot launch. (With regs per SM == regs per block,
    # as on every GPU here, the sub-partition rule gives the same 0: floor(16384/7168) = 2 per
    # sub-partition x 4 = 8 < 9.)
    r = occupancy(h, 288, 224)
    assert r.limits["registers"] == 0 and r.blocks_per_sm == 0 and r.limiters == ("registers",)
    # 255 regs -> 8192/warp; 8 warps = 65536 fits -> 2 warps per sub-partition -> 8 warps / 8 = 1
    # block
    assert occupancy(h, 256, 255).limits["registers"] == 1
    assert occupancy(h, 256, 0).limits["registers"] == UNLIMITED


def test_shared_memory_caps_default_and_optin():
    h = get_gpu("H200")
    # 48 KiB dynamic without opt-in: alloc 50176 equals the default cap 49152 + 1024 -> fits,
    # 233472/50176 = 4
    r = occupancy(h, 128, 32, smem_dynamic_bytes=48 * KIB, opt_in=False)
    assert r.smem_per_block_alloc_bytes == 50176 and r.limits["shared_mem"] == 4
    # the largest opt-in block: 232448 + 1024 = 233472 -> 1 block; one byte more rounds to 233600 >
    # cap -> 0
    assert occupancy(h, 128, 32, smem_dynamic_bytes=232448).limits["shared_mem"] == 1
    assert occupancy(h, 128, 32, smem_dynamic_bytes=232449).limits["shared_mem"] == 0
    assert (
        occupancy(h, 128, 32, smem_dynamic_bytes=1, opt_in=True).limits["shared_mem"]
        == 233472 // 1152
    )


def test_cc7_granularity_256_and_no_reserved():
    # V100-SXM2 props from formats.md §3 (Kineto deviceProperties): 96 KiB per SM, opt-in 96 KiB, no
    # reserve
    v100 = GPUSpec(
        name="V100 (test)",
        cc=(7, 0),
        sm_count=80,
        max_threads_per_sm=2048,
        max_warps_per_sm=64,
        max_blocks_per_sm=32,
        regs_per_sm=65536,
        max_regs_per_block=65536,
        max_regs_per_thread=255,
        smem_per_sm_bytes=98304,
        smem_per_block_bytes=49152,
        smem_per_block_optin_bytes=98304,
        reserved_smem_per_block_bytes=0,
        max_threads_per_block=1024,
        from_registry=False,
    )
    assert smem_granularity_bytes((7, 0)) == 256 and smem_granularity_bytes((8, 0)) == 128
    r = occupancy(v100, 256, 32, smem_static_bytes=1000)
    assert r.smem_per_block_alloc_bytes == 1024 and r.limits["shared_mem"] == 96
    assert r.limits["barriers"] == UNLIMITED  # the barrier limit applies from CC 9.0 on
    # CC 7.x: the per-block cap is not raised by a reserve; 96 KiB opt-in fits exactly once
    assert occupancy(v100, 256, 32, smem_dynamic_bytes=96 * KIB).limits["shared_mem"] == 1
    # on an A100 the same 1000 B allocates 1000 + 1024 -> 2048 (128 B steps)
    assert (
        occupancy(get_gpu("A100"), 256, 32, smem_static_bytes=1000).smem_per_block_alloc_bytes
        == 2048
    )


def test_barrier_limit():
    # CC 9.0: 32 blocks x 2 = 64 barriers per SM; 3 per block -> 21 blocks (1-warp blocks, no regs)
    r = occupancy(get_gpu("H200"), 32, 0, barriers_per_block=3)
    assert r.limits["barriers"] == 21 and r.blocks_per_sm == 21 and r.limiters == ("barriers",)
    # CC 12.0: 24 x 1 = 24 barriers; 2 per block -> 12
    assert occupancy(get_gpu("RTX PRO 6000"), 32, 0, barriers_per_block=2).limits["barriers"] == 12
    # CC 8.x: no barrier limit
    assert occupancy(get_gpu("A100"), 32, 0, barriers_per_block=3).limits["barriers"] == UNLIMITED


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(block_size=0, regs_per_thread=32), "block_size"),
        (dict(block_size=1025, regs_per_thread=32), "block_size"),
        (dict(block_size=-32, regs_per_thread=32), "block_size"),
        (dict(block_size=128, regs_per_thread=256), "regs_per_thread"),
        (dict(block_size=128, regs_per_thread=-1), "regs_per_thread"),
        (dict(block_size=128, regs_per_thread=32, smem_static_bytes=-1), "smem_static_bytes"),
        (dict(block_size=128, regs_per_thread=32, smem_dynamic_bytes=-1), "smem_dynamic_bytes"),
        (dict(block_size=128, regs_per_thread=32, barriers_per_block=-1), "barriers_per_block"),
        (dict(block_size=128, regs_per_thread=32, carveout_pct=101), "carveout_pct"),
        (dict(block_size=128, regs_per_thread=32, smem_config_bytes=-1), "smem_config_bytes"),
        (
            dict(block_size=128, regs_per_thread=32, carveout_pct=50, smem_config_bytes=65536),
            "not both",
        ),
    ],
)
def test_invalid_inputs_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        occupancy(get_gpu("H200"), **kwargs)


def test_unsupported_gpu_specs_raise():
    future = replace(get_gpu("H200"), cc=(13, 0))
    with pytest.raises(ValueError, match="13.0"):
        occupancy(future, 128, 32)
    partial = from_device_attributes({"display_name": "Mystery"})
    with pytest.raises(ValueError, match="lacks"):
        occupancy(partial, 128, 32)
