"""Each model reproduces the chapter's own figures from its own parameters, and answers for other
shapes and GPUs (values worked out by hand in the comments)."""

from __future__ import annotations

import math

import pytest

from analyzers.cases import bank_conflicts, evaluate
from analyzers.cases.s52_operator import column_read_addresses, transpose_read_degree

MiB, KiB, GiB = 2**20, 2**10, 2**30
US, MS = 1e-6, 1e-3
H100, H200, A100 = "H100 SXM", "H200", "A100"
RTX = "RTX PRO 6000"


def v(case, key, gpu=None, **params):
    return evaluate(case, gpu, params).value(key)


# ---- 5.1 ----------------------------------------------------------------------------------------


def test_h2d_chapter_and_hand_worked():
    # 64 MiB / 64 GB/s
    assert v("h2d.chunked_copy", "copy_time", link=64) == pytest.approx(1.05 * MS, rel=0.002)
    # A100 (PCIe Gen4, 32 GB/s raw), 128 MiB in 4 chunks, t0 = 10 µs, pinned at 25 GB/s, 400 µs of
    # compute: raw 134217728 / 32e9 = 4.194304 ms; chunk = 10 µs + 33554432 / 25e9 = 1.3521773 ms
    # serial = 4 x 1.3521773 + 0.4 = 5.8087091 ms; pipelined = 4 x 1.3521773 + 0.1 = 5.5087091 ms
    # pinned = 4 x 10 µs + 134217728 / 25e9 = 5.4087091 ms
    ev = evaluate(
        "h2d.chunked_copy", A100, {"size": 128, "k": 4, "compute": 400, "t0": 10, "link_bw": 25}
    )
    assert ev.value("copy_time") == pytest.approx(4.194304 * MS)
    assert ev.value("serial_time") == pytest.approx(5.8087091 * MS)
    assert ev.value("pipelined_time") == pytest.approx(5.5087091 * MS)
    assert ev.value("pinned_time") == pytest.approx(5.4087091 * MS)
    # pageable, staged through a 2 MiB bounce buffer at 10 GB/s: each 32 MiB chunk is 16 pieces of 2
    # MiB, the memcpy (209.7152 µs) slower than the DMA (83.88608 µs): 16 x 209.7152 + 83.88608 =
    # 3.43932928 ms per chunk; 4 x (10 µs + 3.43932928 ms) = 13.79731712 ms
    ev = evaluate(
        "h2d.chunked_copy", A100, {"size": 128, "k": 4, "t0": 10, "link_bw": 25, "staging": 10}
    )
    assert ev.value("pageable_time") == pytest.approx(13.79731712 * MS)
    assert ev.params.link == 32
    # the default pinned bandwidth is 86 % of the link (A100: 27.52 GB/s), the host memcpy 0.3 x the
    # link
    assert evaluate("h2d.chunked_copy", A100).params.link_bw == pytest.approx(27.52)
    assert evaluate("h2d.chunked_copy", A100).params.staging == pytest.approx(9.6)
    terms = {t.name: t.value for t in ev["pageable_time"].terms}
    assert terms["host memcpy into the bounce buffer"] == pytest.approx(134217728 / 10e9)
    assert sum(terms.values()) == pytest.approx(ev.value("pageable_time"))


def test_timing_positions():
    # (15+20)/(15+5)
    assert v("timing.positions", "call_speedup") == pytest.approx(1.75)
    assert v("timing.positions", "call_speedup", k=10, f=30, s=2) == pytest.approx(40 / 35)
    # the measured kernel, H200, 2^24 elements = 128 MiB > the 60 MiB L2: t_kernel 2.5 µs + 550 ns +
    # the rest of 134217728 B: the first 4325376 B (132 x 2048 x 16 B in flight) at 4320 GB/s, then
    # min(4320 GB/s, 4325376 B / 550 ns = 7864 GB/s)
    ev = evaluate("timing.positions", H200, {"n": 1 << 24})
    assert ev.value("event_time") == pytest.approx(2.5 * US + 550e-9 + 134217728 / 4320e9)
    assert ev.value("host_clock_async") == pytest.approx(3 * US)  # one launch
    assert ev.value("host_clock_until_result") == pytest.approx(
        15 * US + ev.value("event_time") - 2.5 * US
    )
    # 2^20 elements (8 MiB) fit in the L2 and are not flushed: the L2 rate (9600 GB/s), capped by
    # Little's law (4325376 B / 550 ns = 7864 GB/s) beyond the first round trip
    ev = evaluate("timing.positions", H200, {"n": 1 << 20})
    assert ev.value("event_time") == pytest.approx(
        2.5 * US + 550e-9 + 4325376 / 9600e9 + (8388608 - 4325376) / (4325376 / 550e-9)
    )


def test_compile_amortization():
    assert v("compile.amortization", "mean_cost_per_call", N=100) == pytest.approx(2 * MS)
    # 3 s of compile saving 50 µs per call: N* = 3000 / 0.05 = 60000 calls
    assert v(
        "compile.amortization", "break_even_calls", T_compile=3000, t_run=1, t_eager=1.05
    ) == pytest.approx(60000)
    # compiled path slower: never
    ev = evaluate("compile.amortization", params={"t_eager": 0.5})
    assert (
        math.isinf(ev.value("break_even_calls"))
        and ev.to_json()["predictions"]["break_even_calls"]["value"] is None
    )


def test_launch_overhead():
    # defaults: 100 kernels of 2 µs, 5 µs per submission: 5 + 99 x 5 + 2 = 502 µs, GPU busy 200/502
    ev = evaluate("launch.overhead")
    assert ev.value("total_time") == pytest.approx(502 * US)
    assert ev.value("gpu_busy") == pytest.approx(100 * 200 / 502)
    assert ev.value("bound") == "host"
    # 10 kernels of 8 µs: 5 + 9 x 8 + 8 = 85 µs, busy 80/85, GPU-bound
    ev = evaluate("launch.overhead", params={"n": 10, "t_k": 8})
    assert ev.value("total_time") == pytest.approx(85 * US) and ev.value("bound") == "GPU"
    # back to back: the GPU waits for the CPU, max(submission 6.5 µs, 1.4 µs of device per kernel)
    assert v("launch.overhead", "back_to_back_time", t_submit=6.5) == pytest.approx(6.5 * US)
    assert v("launch.overhead", "back_to_back_time", t_submit=0.2) == pytest.approx(1.4 * US)
    # the chapter's C++ floor
    assert v("launch.overhead", "cxx_launch_time") == pytest.approx(4.4 * US)


def test_occupancy_chapter_block_differs_by_gpu():
    ev = evaluate("occupancy.sm")  # H100, the chapter's
    assert ev.value("smem_per_block") == 96 * KiB and ev.value("warps_per_block") == 8
    assert ev.value("blocks_per_sm") == 2 and ev.value("occupancy") == 25.0
    assert ev.value("limiter") == "shared_mem"
    assert ev.value("bandwidth_per_sm") == pytest.approx(3.35e12 / 132)
    # the same 96 KiB block: RTX PRO 6000 (100 KiB/SM) 1 block = 8 of 48 warps; A100 (164 KiB) 1 = 8
    # of 64
    assert v("occupancy.sm", "occupancy", RTX) == pytest.approx(100 * 8 / 48)
    assert v("occupancy.sm", "occupancy", A100) == 12.5
    assert v("occupancy.sm", "occupancy", H200) == 25.0
    # accumulator in registers: S = 32 KiB, +1 KiB -> 233472/33792 = 6 by smem; 64 regs -> 4 blocks
    # = 50 %
    ev = evaluate("occupancy.sm", H100, {"acc": 0})
    assert (
        ev.value("blocks_by_smem") == 6
        and ev.value("blocks_per_sm") == 4
        and ev.value("limiter") == "registers"
    )
    # the suite's FMA loop (35.43 GFLOP, 4224 blocks of 256): at 12.5 % occupancy (1 block/SM, 8
    # warps x 8 chains = 64 >= 16 in flight) still the full FP32 rate: 2.5 µs + 35.43e9 / (60.3e12 x
    # 4224/(32 x 132)) = 590.06 µs
    ev = evaluate(
        "occupancy.sm", H200, {"tile": 0, "smem_extra": 200 * 1024, "regs": 25, "chains": 8}
    )
    assert ev.value("occupancy") == 12.5
    assert ev.value("fma_time") == pytest.approx(2.5 * US + 35.43e9 / 60.3e12)
    # one chain per thread at 12.5 %: 8 warps x 1 < 16 -> half the rate
    ev = evaluate(
        "occupancy.sm", H200, {"tile": 0, "smem_extra": 200 * 1024, "regs": 25, "chains": 1}
    )
    assert ev.value("fma_time") == pytest.approx(2.5 * US + 35.43e9 / (60.3e12 * 0.5))


def test_littles_law():
    assert v("littles_law", "bytes_in_flight_needed", H200, latency=500) == pytest.approx(2.4e6)
    # 25 % occupancy, 16 B per thread: 132 x 2048 x 0.25 x 16 = 1081344 B in flight / 550 ns = 1.966
    # TB/s
    ev = evaluate("littles_law", H200, {"occ": 25})
    assert ev.value("achieved_bandwidth") == pytest.approx(1081344 / 550e-9)
    # the range: at the loaded latency (550 ns) ... at the unloaded one (250 ns), capped by the
    # achievable ceiling
    assert ev["achieved_bandwidth"].lo == pytest.approx(1081344 / 550e-9)
    assert ev["achieved_bandwidth"].hi == pytest.approx(min(4320e9, 1081344 / 250e-9))
    # enough in flight: the ceiling
    full = evaluate("littles_law", H200)["achieved_bandwidth"]
    assert full.value == pytest.approx(4320e9) and full.lo == pytest.approx(0.85 * 4320e9)
    assert v("littles_law", "bytes_in_flight_needed", A100) == pytest.approx(2.039e12 * 550e-9)


def test_mma_granularity():
    ev = evaluate("mma.granularity")
    assert (ev.value("flop_per_mma"), ev.value("mma_per_block_step"), ev.value("mma_per_warp")) == (
        4096,
        512,
        64,
    )
    # 64x64x32 with 4 warps: (64/16)(64/8)(32/16) = 64 MMAs, 16 per warp
    ev = evaluate("mma.granularity", params={"m": 64, "n": 64, "k": 32, "warps": 4})
    assert ev.value("mma_per_block_step") == 64 and ev.value("mma_per_warp") == 16


def test_warpspec_times_per_gpu():
    ev = evaluate("warpspec.producer_consumer")  # H100
    assert ev.value("t_move") == pytest.approx(1.29 * US, rel=0.005)
    assert ev.value("t_compute") == pytest.approx(0.28 * US, rel=0.005)
    assert ev.value("move_compute_ratio") == pytest.approx(4.6, rel=0.01)
    assert ev.value("machine_balance") == pytest.approx(295, rel=0.005)
    # H200: 32768 / (4.8e12/132) = 0.9011 µs; A100: 32768 / (2.039e12/108) = 1.7356 µs, compute
    # 64 x 32768 / (312e12/108) = 0.7259 µs; RTX PRO 6000: 32768 / (1792e9/188) = 3.4377 µs
    assert v("warpspec.producer_consumer", "t_move", H200) == pytest.approx(0.9011 * US, rel=1e-3)
    assert v("warpspec.producer_consumer", "machine_balance", H200) == pytest.approx(206, rel=0.002)
    assert v("warpspec.producer_consumer", "t_move", A100) == pytest.approx(1.7356 * US, rel=1e-3)
    assert v("warpspec.producer_consumer", "t_compute", A100) == pytest.approx(
        0.7259 * US, rel=1e-3
    )
    assert v("warpspec.producer_consumer", "t_move", RTX) == pytest.approx(3.4377 * US, rel=1e-3)


# ---- 5.2 ----------------------------------------------------------------------------------------


def test_tiling_chapter_figures():
    # RTX PRO 6000, 64x64, k = 32
    ev = evaluate("tiling.traffic")
    assert (ev.value("a_bytes"), ev.value("w_bytes"), ev.value("c_bytes")) == (
        8 * MiB,
        96 * MiB,
        24 * MiB,
    )
    assert ev.value("min_traffic") == 128 * MiB
    assert ev.value("traffic") == 3096 * MiB
    assert ev.value("smem_alloc_per_block") == 25 * KiB and ev.value("blocks_by_smem") == 4
    assert ev["traffic"].display == "3096 MiB"
    ev = evaluate("tiling.traffic", params={"m": 128, "n": 128})
    assert ev.value("traffic") == 1560 * MiB
    assert ev.value("smem_alloc_per_block") == 81 * KiB and ev.value("blocks_by_smem") == 1
    ev = evaluate("tiling.traffic", params={"n": 128})  # Experiment 5-1
    assert ev.value("smem_per_block") == 44 * KiB and ev.value("blocks_by_smem") == 2
    assert ev.value("traffic") == 2328 * MiB
    assert ev.value("bandwidth_fraction_needed") == pytest.approx(75.2, abs=0.05)


def test_tiling_other_shape_and_gpus():
    # M=2048, K=1024, N=4096, 128x128, k=64:
    #   V = 2*2048*1024*32 + 2*1024*4096*16 + 2*2048*4096 = 128 + 128 + 16 MiB = 272 MiB
    #   S = 2*128*64 + 2*64*128 + 4*128*128 = 96 KiB; +1 KiB = 99328 B:
    #   H100 233472/99328 = 2, RTX PRO 6000 102400/99328 = 1, A100 167936/99328 = 1
    p = {"M": 2048, "K": 1024, "N": 4096, "m": 128, "n": 128, "k": 64}
    assert v("tiling.traffic", "traffic", **p) == 272 * MiB
    assert v("tiling.traffic", "smem_per_block", **p) == 96 * KiB
    assert [v("tiling.traffic", "blocks_by_smem", g, **p) for g in (H100, RTX, A100)] == [2, 1, 1]
    # the chapter's 64x64 block (25 KiB): RTX 4, H100 233472/25600 = 9, A100 167936/25600 = 6
    assert [v("tiling.traffic", "blocks_by_smem", g) for g in (RTX, H100, H200, A100)] == [
        4,
        9,
        9,
        6,
    ]
    # tiles that do not divide the matrix are padded: N/n = ceil(12288/100) = 123
    assert v("tiling.traffic", "a_reads", n=100) == 123


def test_bank_conflict_model():
    assert [v("bank.column_read", "degree", stride=s) for s in (32, 33, 2, 16, 24, 1)] == [
        32,
        1,
        2,
        16,
        8,
        1,
    ]
    # 4-byte: gcd(stride, 32)
    for s in range(1, 65):
        assert v("bank.column_read", "degree", stride=s) == math.gcd(s, 32)
    # 8-byte accesses, 2 phases of 16 lanes: stride 2 -> words 0..31 per phase, conflict-free;
    # stride 32 -> words 32i and 32i+1: 16 in bank 0 and 16 in bank 1 per phase -> 32 passes / 2 =
    # 16-way
    assert v("bank.column_read", "degree", stride=2, width=8) == 1
    ev = evaluate("bank.column_read", params={"stride": 32, "width": 8})
    assert (
        ev.value("degree") == 16
        and ev.value("wavefronts") == 32
        and ev.value("ideal_wavefronts") == 2
    )
    # 16-byte, 4 phases of 8 lanes: stride 4 -> 32 distinct banks; stride 8 -> lanes 0 and 4 share
    # bank 0
    assert v("bank.column_read", "degree", stride=4, width=16) == 1
    assert v("bank.column_read", "degree", stride=8, width=16) == 2
    assert v("bank.column_read", "conflict_free_stride", stride=32) == 33
    # broadcast: every lane reading the same word is one pass
    assert bank_conflicts([5] * 32).degree == 1
    assert bank_conflicts(column_read_addresses(64)).degree == 32


def test_transpose_read_degrees():
    # 16x16 block: warp 0 covers rows ty = 0, 1; tile[tx][ty] = word 16 tx + ty -> banks {0, 16} +
    # ty, 8 distinct words each -> 8-way; 32x32 -> 32-way; padded 32 -> 1; padded 16 -> 2 (17 tx + 1
    # wraps)
    assert [
        transpose_read_degree(t, pad).degree
        for t, pad in ((16, 0), (16, 1), (32, 0), (32, 1), (8, 0))
    ] == [8, 2, 32, 1, 2]
    ev = evaluate("transpose.tile", H200, {"t": 32})
    assert ev.value("dram_traffic") == 512 * MiB and ev.value("time_bound") == pytest.approx(
        512 * MiB / 4.8e12
    )
    # 32x32 tile, 1024 threads, 2 resident: 65536 blocks, 497 per SM -> 249 rounds of (2 x 550 ns +
    # the shared phase: 32 warps x (32 + 1) wavefronts / 1.98 GHz = 533.3 ns) = 406.7 µs, + 2.5 µs
    shared = 32 * 33 / 1.98e9
    assert ev.value("time") == pytest.approx(2.5 * US + 249 * (1100e-9 + shared))
    # equal block size (256 threads): a 32x32 tile with 8 rows keeps 4 loads per thread in flight, 8
    # blocks per SM; padded, it is DRAM-bound: 512 MiB / 4320 GB/s + 2.5 µs, 2.2x faster than the
    # 16x16 tile
    ev = evaluate("transpose.tile", H200, {"t": 32, "rows": 8, "pad": 1, "ref_rows": 16})
    assert ev.value("resident_blocks") == 8 and ev.value("threads_per_block") == 256
    assert ev.value("time") == pytest.approx(2.5 * US + 512 * MiB / 4320e9)
    assert ev.value("speedup_vs_ref") == pytest.approx(2.2, abs=0.05)


def test_rmsnorm_split():
    assert v("rmsnorm.split", "tasks") == 1024 and v("rmsnorm.split", "tasks", rows=1) == 1
    # decode row split in 16: 16 tasks; traffic = read + write 2 x 8192 + second read 8192 + 2 x 16
    # x 4 partials
    ev = evaluate("rmsnorm.split", H200, {"rows": 1, "s": 16})
    assert ev.value("tasks") == 16 and ev.value("traffic") == 24704
    assert ev.value("sm_fill") == pytest.approx(100 * 16 / 132)
    # 8192 rows, one pass: 8192 programs of 8 KiB (+ the 8 KiB weight), 16 resident per SM: 34.6 MiB
    # in flight, so DRAM-bound: 2.5 µs + 550 ns + (2 x 8192 + 1) x 8192 B / 4320 GB/s
    ev = evaluate("rmsnorm.split", H200, {"rows": 8192})
    assert ev.value("time") == pytest.approx(
        2.5 * US + 550e-9 + (2 * 8192 + 1) * 8192 / 4320e9, rel=1e-6
    )
    # 32 segments: 262144 programs of 256 B per kernel: lifetime-bound, ceil(1986 / 16) x 2 x 550 ns
    # per kernel
    ev = evaluate("rmsnorm.split", H200, {"rows": 8192, "s": 32})
    assert ev.value("time") == pytest.approx(2 * 2.5 * US + 2 * 125 * 1100e-9)
    with pytest.raises(ValueError, match="more than the row length"):
        evaluate("rmsnorm.split", params={"s": 5000})


# ---- 5.3 ----------------------------------------------------------------------------------------


def test_fusion_chapter_figures():
    ev = evaluate("fusion.activation_chain")  # RTX PRO 6000
    assert ev.value("unfused_traffic") == 120 * MiB and ev.value("fused_traffic") == 72 * MiB
    assert ev.value("traffic_ratio") == pytest.approx(0.6)
    assert (
        ev.value("unfused_quant_traffic") == 156 * MiB
        and ev.value("fused_quant_traffic") == 60 * MiB
    )
    assert ev.value("unfused_peak_memory") == 72 * MiB and ev.value("fused_peak_memory") == 60 * MiB
    assert ev.value("saved_bytes_per_row") == 96 * KiB
    assert ev.value("saved_time_per_row") == pytest.approx(54.9e-9, rel=1e-3)
    assert ev.value("break_even_rows") == pytest.approx(91.1, abs=0.1)
    # Experiment 5-2's lifetimes: three steps move 48 + 72 + 36 = 156 MiB with at most 72 MiB live;
    # fully fused moves 60 MiB with G, U, Zq = 60 MiB live
    rows = ev.tables["tensor_lifetimes"]
    three = [r for r in rows if r["variant"] == "three steps"]
    assert [r["traffic_MiB"] for r in three] == [48, 72, 36] and max(
        r["live_MiB"] for r in three
    ) == 72
    assert [r["freed_after"] for r in three] == ["G", "S, U", "Z"]
    (fused,) = [r for r in rows if r["variant"] == "fully fused"]
    assert fused["traffic_MiB"] == 60 and fused["live_MiB"] == 60


def test_fusion_other_gpu_and_shape():
    # H200, M = 4096: 480 MiB unfused; at 4.8 TB/s 104.86 µs; fusion break-even 5 µs / (96 KiB /
    # 4.8e12) = 244 rows
    ev = evaluate("fusion.activation_chain", H200, {"M": 4096})
    assert ev.value("unfused_traffic") == 480 * MiB
    assert ev.value("unfused_time_bound") == pytest.approx(480 * MiB / 4.8e12)
    assert ev.value("break_even_rows") == pytest.approx(244.14, abs=0.01)
    # the 384 MiB working set does not fit the 60 MiB L2: at most 60 MiB can come from L2
    assert ev["unfused_time_bound"].min_physical == pytest.approx(420 * MiB / 4.8e12)
    # the estimate: two kernels of 49152 programs (1024 elements each), both DRAM-bound at 4320
    # GB/s: SiLU 192 MiB, multiply 288 MiB, each + 550 ns + 2.5 µs
    t = 2 * (2.5 * US + 550e-9) + 480 * MiB / 4320e9
    assert ev.value("unfused_time") == pytest.approx(t, rel=1e-3)
    assert {x.name for x in ev["unfused_time"].terms} == {"kernel floor", "SiLU", "multiply"}
    # decode (M = 1): 12 programs, lifetime-bound: 2.5 µs + 2 x 550 ns per kernel
    assert v("fusion.activation_chain", "fused_time", H200, M=1) == pytest.approx(
        2.5 * US + 1100e-9
    )


def test_pipeline_double_buffer():
    ev = evaluate("pipeline.double_buffer")
    assert ev.value("serial_time") == pytest.approx(6.28 * US)
    assert ev.value("pipelined_time") == pytest.approx(5.44 * US)
    assert ev.value("time_change") == pytest.approx(-13.4, abs=0.1)
    assert ev.value("compute_busy") == pytest.approx(20.6, abs=0.1)
    # a third slot changes nothing
    assert ev.value("one_more_slot_time") == pytest.approx(5.44 * US)
    # compute-bound: n = 8, t_m = 1, t_c = 2: 1 + 7 x 2 + 2 = 17 µs, serial 24 µs; one slot = serial
    ev = evaluate("pipeline.double_buffer", params={"n": 8, "t_m": 1, "t_c": 2})
    assert ev.value("pipelined_time") == pytest.approx(17 * US) and ev.value(
        "serial_time"
    ) == pytest.approx(24 * US)
    assert ev.value("bound") == "compute"
    assert v("pipeline.double_buffer", "pipelined_time", slots=1) == pytest.approx(6.28 * US)
    # derived from the H200: t_m = 0.9011 µs, t_c = 0.2799 µs -> 0.9011 x 4 + 0.2799
    assert v("pipeline.double_buffer", "pipelined_time", H200, derive=1) == pytest.approx(
        (4 * 32768 / (4.8e12 / 132) + 64 * 32768 / (989e12 / 132))
    )


def test_backpressure():
    ev = evaluate("backpressure.smem_budget")  # RTX PRO 6000
    assert ev.value("need_per_block") == 80 * KiB and ev.value("fits_alone") == "yes"
    assert ev.value("budget_per_block") == 49 * KiB and ev.value("queue_slots") == 1
    # H100: 233472/2 - 1024 = 115712 B (113 KiB) -> floor((113 - 32)/16) = 5 slots, capped at the
    # queue's 3; with the full queue 233472 / 82944 = 2 resident
    ev = evaluate("backpressure.smem_budget", H100)
    assert ev.value("budget_per_block") == 115712 and ev.value("queue_slots") == 3
    assert ev.value("max_resident_full_queue") == 2


def test_flash_attention_traffic():
    ev = evaluate("flash.attention_traffic")
    assert ev.value("qkvo_bytes") == 2 * MiB and ev.value("s_bytes") == 256 * MiB
    assert ev.value("standard_extra_traffic") == GiB and ev.value("extra_vs_required") == 128
    # L = 4096, d = 128: required 4 x 1 MiB = 4 MiB, extra 4 x 64 MiB = 256 MiB -> 64x (= 2L/d x
    # ...)
    ev = evaluate("flash.attention_traffic", params={"L": 4096})
    assert ev.value("required_traffic") == 4 * MiB and ev.value("extra_vs_required") == 64
    # H200, causal, L = 8192: 64 query blocks on 132 SMs; the last block's 4 x 128 x 8192 x 128
    # FLOPs at one SM's share of 791.2 TFLOP/s = 89.6 µs, + 2.5 µs
    ev = evaluate("flash.attention_traffic", H200, {"causal": 1})
    assert ev.value("flash_time") == pytest.approx(
        2.5 * US + 4 * 128 * 8192 * 128 / (791.2e12 / 132)
    )
    # standard: 3 kernels + the two GEMMs (4 L² d FLOPs at the tensor rate) + S and P through DRAM
    assert ev.value("standard_time") == pytest.approx(
        7.5 * US + 4 * 8192**2 * 128 / 791.2e12 + (8 * MiB + GiB) / 4320e9
    )


def test_kv_block_size_chapter_and_other_gpu():
    # 101376 B on the RTX PRO 6000
    ev = evaluate("flash.kv_block_size")
    assert (ev.value("a"), ev.value("scans"), ev.value("kv_traffic")) == (82, 100, 400 * MiB)
    assert ev.value("traffic_saved_vs_ref") == 144 * MiB
    assert ev.value("updates_ratio_vs_ref") == pytest.approx(40.96)
    assert (v("flash.kv_block_size", "a", b=1), v("flash.kv_block_size", "scans", b=1)) == (128, 64)
    ev = evaluate("flash.kv_block_size", params={"prefetch": 1})
    assert (ev.value("a"), ev.value("scans"), ev.value("kv_traffic")) == (66, 125, 500 * MiB)
    # H100 opt-in 232448 B: a = (232448 - 16384) / 1036 = 208.6 -> 208, ceil(8192/208) = 40 scans,
    # 160 MiB
    ev = evaluate("flash.kv_block_size", H100)
    assert ev.params.budget == 232448
    assert (ev.value("a"), ev.value("scans"), ev.value("kv_traffic")) == (208, 40, 160 * MiB)
    assert v("flash.kv_block_size", "a", align=16) == 80  # MMA-friendly rows


# ---- 5.4 ----------------------------------------------------------------------------------------


def test_illegal_moves_and_fp8():
    ev = evaluate("fusion.illegal_moves")
    assert ev.value("saved_traffic") == 48 * MiB and ev.value("output_tiles") == 3072
    assert ev.value("k_blocks") == 128 and ev.value("acc_bytes") == 16 * KiB
    assert v("fusion.illegal_moves", "output_tiles", BM=128, BN=128) == 8 * 96
    assert v("quant.fp8_row_scale", "fp8_max") == 448
    # a 65536-element FP16 row (128 KiB) stays on chip on an H100 (227 KiB) but not on an RTX PRO
    # 6000 (99 KiB)
    assert v("quant.fp8_row_scale", "dram_reads_per_row", H100, K=65536) == 1
    assert v("quant.fp8_row_scale", "dram_reads_per_row", RTX, K=65536) == 2
    assert v("quant.fp8_row_scale", "clipped_partial_scale") > 0


def test_fused_reads():
    ev = evaluate("quant.fused_reads")
    assert ev.value("separate_traffic") == 444 * MiB and ev.value("fused_traffic") == 620 * MiB
    assert ev.value("weights_and_output") == 204 * MiB and ev.value("fused_extra") == pytest.approx(
        39.6, abs=0.1
    )
    # N = 3072: 24 column blocks; W re-read per row block 32 x 12 MiB = 384 MiB + output 24 MiB =
    # 408 MiB separate 32 + 16 + 24 x 16 + 408 = 840 MiB; fused 32 + 24 x 32 + 408 = 1208 MiB
    ev = evaluate("quant.fused_reads", params={"N": 3072})
    assert ev.value("separate_traffic") == 840 * MiB and ev.value("fused_traffic") == 1208 * MiB


def test_dispatch_call_ratio():
    assert v("dispatch.call_ratio", "new_mean") == pytest.approx(12.5 * US)
    assert v("dispatch.call_ratio", "new_mean", p="2/3") == pytest.approx(10 * US)
    assert v("dispatch.call_ratio", "new_mean", p=0.9) == pytest.approx(6.5 * US)
    assert v("dispatch.call_ratio", "break_even_new") == pytest.approx(2 / 3)
    assert v("dispatch.call_ratio", "break_even_choose") == pytest.approx(0.2)
    # old 8/12, new 6/15, selection 0.5: new wins above (15-12)/((15-12)-(6-8)) = 0.6;
    # choosing (6 on A, 12 on B, +0.5) beats old above 0.5/(0.5+1.5) = 0.25
    p = {"old_a": 8, "old_b": 12, "new_a": 6, "new_b": 15, "select": 0.5}
    assert v("dispatch.call_ratio", "break_even_new", **p) == pytest.approx(0.6)
    assert v("dispatch.call_ratio", "break_even_choose", **p) == pytest.approx(0.25)


def test_autotune_payback():
    # 60 s / 5 µs = 12e6 calls, 12000 s at 1000 calls/s
    ev = evaluate("autotune.payback")
    assert ev.value("break_even_calls") == pytest.approx(12e6) and ev.value(
        "payback_time"
    ) == pytest.approx(12000)


# ---- 5.5 ----------------------------------------------------------------------------------------


def test_graph_replay_counts():
    ev = evaluate("graph.replay")
    assert [
        ev.value(k)
        for k in (
            "eager_submissions",
            "graph_submissions",
            "graph_kernels",
            "fused_eager_kernels",
            "fused_graph_submissions",
        )
    ] == [18, 3, 18, 15, 3]
    assert v("graph.replay", "eager_submissions", calls=10) == 60
    # time per FFN at M = 1 on an H200: the three weight matrices (3 x 4096 x 12288 x 2 B) at 4320
    # GB/s, plus the per-kernel cost: 6 x 2.5 µs launched one by one, 6 x 1.4 µs replayed in a graph
    w = 3 * 4096 * 12288 * 2 / 4320e9
    ev = evaluate("graph.replay", H200, {"calls": 1})
    assert ev.value("eager_time") == pytest.approx(w + 6 * 2.5 * US)
    assert ev.value("graph_time") == pytest.approx(w + 6 * 1.4 * US)
    assert ev.value("fused_graph_time") == pytest.approx(w + 5 * 1.4 * US)
    assert ev["eager_time"].kind == "estimate" and ev["eager_time_bound"].kind == "lower_bound"


def test_graph_input_copy():
    # 7.5 µs x 1008 GB/s
    assert v("graph.input_copy", "critical_bytes") == pytest.approx(7.56e6)
    # H200 (4.8 TB/s): 15 µs x 4.8e12 / 2 = 36 MB; 16 MiB on an RTX 4090: copy 33.29 µs -> 58.29 µs
    # > 40 µs
    assert v("graph.input_copy", "critical_bytes", H200) == pytest.approx(36e6)
    ev = evaluate("graph.input_copy", params={"size": 16})
    assert (
        ev.value("graph_time") == pytest.approx(25 * US + 2 * 16 * MiB / 1008e9)
        and ev.value("graph_wins") == "no"
    )
    assert v("graph.input_copy", "graph_time_direct", size=16) == pytest.approx(25 * US)


def test_shapes_specialize():
    ev = evaluate("shapes.specialize")
    assert ev.value("rows_per_group") == 5632 and ev.value("bucket_rows") == 8192
    assert ev.value("break_even_generic_bucket") == pytest.approx(65.2, abs=0.05)
    assert ev.value("break_even_bucket_spec") == pytest.approx(89.3, abs=0.05)
    assert ev.value("break_even_generic_spec") == pytest.approx(78.4, abs=0.05)
    assert ev.value("total_bucket") == pytest.approx(1.268) and ev.value(
        "total_spec"
    ) == pytest.approx(1.376)
    assert ev.value("best") == "buckets"
    assert v("shapes.specialize", "best", groups=100) == "specialised"  # 1.64 vs 1.58 s
    # Experiment 5-7 (4 small calls), times derived for the RTX PRO 6000 (504 TFLOP/s): 4608 rows x
    # 6·4096·12288 FLOP / (0.2 x 504e12) = 13.805 ms; buckets 6144 rows / 0.4 -> 9.2035 ms;
    # specialised / 0.5 -> 5.5221 ms; generic <-> buckets (400-100)/(13.805-9.2035) = 65.19 groups
    ev = evaluate("shapes.specialize", params={"small_calls": 4, "derive_T": 1})
    assert ev.value("rows_per_group") == 4608 and ev.value("bucket_rows") == 6144
    assert ev.value("T_generic_derived") == pytest.approx(13.805 * MS, rel=1e-4)
    assert ev.value("T_bucket_derived") == pytest.approx(9.2035 * MS, rel=1e-4)
    assert ev.value("break_even_generic_bucket") == pytest.approx(65.19, abs=0.01)
    # on an H200 (989 TFLOP/s) the same MFU gives half the time per group
    assert v("shapes.specialize", "T_generic_derived", H200) == pytest.approx(
        5632 * 6 * 4096 * 12288 / (0.2 * 989e12)
    )


def test_persistent_block_handoff():
    ev = evaluate("persistent.block_handoff")
    assert ev.value("saving") == pytest.approx(11.02 * US)
    assert ev.value("hidden_activation") == pytest.approx(12.32 * US) and ev.value(
        "task_overhead"
    ) == pytest.approx(6.3 * US)
    # balanced stages, projection = activation = 5 µs: 5 + 7 x 5 - 9 x 0.7 = 33.7 µs saved
    assert v("persistent.block_handoff", "saving", proj=5, act=5) == pytest.approx(33.7 * US)


# ---- 5.6 ----------------------------------------------------------------------------------------


def test_amdahl_and_critical_path():
    # f = 90 %, s = 10: 1/(0.1 + 0.09) = 5.263; limit 10
    ev = evaluate("amdahl.request", params={"f": 90, "s": 10})
    assert ev.value("amdahl_speedup") == pytest.approx(1 / 0.19) and ev.value(
        "amdahl_limit"
    ) == pytest.approx(10)
    # prep 10 -> (A 30 || B 20) -> finish 10: 50 µs; A 2x faster -> B is longest: 40 µs; 4x faster
    # changes nothing
    assert v("amdahl.request", "graph_speedup") == pytest.approx(1.25)
    assert v("amdahl.request", "graph_speedup", a_speedup=4) == pytest.approx(1.25)
    assert v("amdahl.request", "critical_branch", a_speedup=4) == "B"


def test_swiglu_request():
    ev = evaluate("request.swiglu_case")
    assert (ev.value("calls"), ev.value("prefill_calls"), ev.value("decode_calls")) == (
        1152,
        36,
        1116,
    )
    assert ev.value("old_total") == pytest.approx(13.59 * MS) and ev.value(
        "new_total"
    ) == pytest.approx(12.16 * MS)
    assert ev.value("saving") == pytest.approx(1.43 * MS) and ev.value(
        "decode_speedup"
    ) == pytest.approx(2.58, abs=0.01)
    assert ev.value("activation_share") == pytest.approx(1.6, abs=0.01)
    # Experiment 5-9, 128 output tokens: 36 x 127 = 4572 decode calls x (2370 - 920)/1116 µs - 20 µs
    # of prefill
    ev = evaluate("request.swiglu_case", params={"out_tokens": 128})
    assert ev.value("decode_calls") == 4572
    assert ev.value("saving") == pytest.approx((4572 * 1450 / 1116 - 20) * US)


# ---- GPU dependence
# -------------------------------------------------------------------------------


def test_the_same_case_differs_across_gpus():
    gpus = (H100, H200, A100, RTX)
    residency = [v("tiling.traffic", "resident_blocks", g, m=128, n=64) for g in gpus]
    moves = [v("warpspec.producer_consumer", "t_move", g) for g in gpus]
    occ = [v("occupancy.sm", "occupancy", g) for g in gpus]
    assert len(set(moves)) == 4
    assert len(set(occ)) == 3 and len(set(residency)) >= 2
