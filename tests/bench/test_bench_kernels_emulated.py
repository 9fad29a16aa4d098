"""The new kernels of the suite without a GPU: their index arithmetic, run in numpy lane by lane
with the fragment layouts of the PTX ISA (ldmatrix m8n8 .x4 with and without .trans; mma.m16n8k16
.row.col BF16 -> FP32), must give A·W; the transposes' launch geometry; the shared-memory budget of
the tensor-core tiles is the chapter's S; the C++ launch-floor program builds with nvcc where the
toolkit is installed and its output is parsed."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from analyzers.cases.s52_operator import tile_smem_bytes, transpose_read_degree
from collectors.bench.cases_operator import TILE_KERNELS, TRANSPOSE_KERNELS, mma_smem_bytes
from collectors.bench.context import KERNEL_SRC

BK = 32


# ---- ks_mma_<m>x<n>, emulated
# -----------------------------------------------------------------------------------


def _ldmatrix(
    smem_rows: dict, lane_addr: list[int], trans: bool
) -> list[list[tuple[float, float]]]:
    """ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lanes 8i..8i+7 give the row addresses of matrix i
    (a row = 8 b16 values, read here from `smem_rows[address]`); register i of lane t holds elements
    (t/4, 2(t%4)) and (t/4, 2(t%4)+1) of matrix i, or with .trans (2(t%4), t/4) and (2(t%4)+1, t/4)."""
    mats = [[smem_rows[lane_addr[8 * i + r]] for r in range(8)] for i in range(4)]
    out = []
    for t in range(32):
        regs = []
        for i in range(4):
            m = mats[i]
            if trans:
                regs.append((m[2 * (t % 4)][t // 4], m[2 * (t % 4) + 1][t // 4]))
            else:
                regs.append((m[t // 4][2 * (t % 4)], m[t // 4][2 * (t % 4) + 1]))
        out.append(regs)
    return out


def _mma(acc, a, b):
    """mma.sync.aligned.m16n8k16.row.col: per lane t (g = t/4, q = t%4) A regs a0..a3 hold
    A[g][2q..], A[g+8][2q..], A[g][2q+8..], A[g+8][2q+8..]; B regs b0, b1 hold B[2q..][g],
    B[2q+8..][g]; C regs c0..c3 hold C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for t in range(32):
        g, q = t // 4, t % 4
        for (r, c), pair in zip(
            ((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8)), a[t]
        ):
            A[r, c], A[r, c + 1] = pair
        for (r, c), pair in zip(((2 * q, g), (2 * q + 8, g)), b[t]):
            B[r, c], B[r + 1, c] = pair
    D = A @ B
    for t in range(32):
        g, q = t // 4, t % 4
        acc[t][0] += D[g, 2 * q]
        acc[t][1] += D[g, 2 * q + 1]
        acc[t][2] += D[g + 8, 2 * q]
        acc[t][3] += D[g + 8, 2 * q + 1]


def emulate_mma(A: np.ndarray, W: np.ndarray, BM: int, BN: int) -> np.ndarray:
    """ks_mma_impl<BM, BN> of chapter5.cuh, statement by statement: swizzled staging, ldmatrix, mma, epilogue."""
    M, K = A.shape
    N = W.shape[1]
    WM, WN = BM // 4, BN // 2
    MT, NT, CW = WM // 16, WN // 8, BN // 8
    C = np.zeros((M, N))
    for by in range(M // BM):
        for bx in range(N // BN):
            m0, n0 = by * BM, bx * BN
            acc = {
                (w, i, j): [[0.0] * 4 for _ in range(32)]
                for w in range(8)
                for i in range(MT)
                for j in range(NT)
            }
            for k0 in range(0, K, BK):
                As, Ws = {}, {}  # 16-byte chunk address (in chunks) -> 8 values
                for r in range(BM):
                    for c in range(4):
                        As[r * 4 + (c ^ ((r >> 1) & 3))] = A[m0 + r, k0 + c * 8 : k0 + c * 8 + 8]
                for r in range(BK):
                    for c in range(CW):
                        Ws[r * CW + (c ^ (r & 7))] = W[k0 + r, n0 + c * 8 : n0 + c * 8 + 8]
                for kk in range(0, BK, 16):
                    for warp in range(8):
                        wm, wn = warp >> 1, warp & 1
                        a = {}
                        for i in range(MT):
                            addrs = []
                            for lane in range(32):
                                r = wm * WM + i * 16 + (lane & 15)
                                c = (kk >> 3) + (lane >> 4)
                                addrs.append(r * 4 + (c ^ ((r >> 1) & 3)))
                            a[i] = _ldmatrix(As, addrs, trans=False)
                        b = {}
                        for j in range(0, NT, 2):
                            addrs = []
                            for lane in range(32):
                                r = kk + (lane & 15)
                                c = ((wn * WN + j * 8) >> 3) + (lane >> 4)
                                addrs.append(r * CW + (c ^ (r & 7)))
                            regs = _ldmatrix(Ws, addrs, trans=True)
                            b[j] = [(x[0], x[1]) for x in regs]
                            b[j + 1] = [(x[2], x[3]) for x in regs]
                        for i in range(MT):
                            for j in range(NT):
                                _mma(acc[(warp, i, j)], a[i], b[j])
            Cs = np.zeros((BM, BN))
            for (warp, i, j), regs in acc.items():
                wm, wn = warp >> 1, warp & 1
                for lane in range(32):
                    r, c = wm * WM + i * 16 + (lane >> 2), wn * WN + j * 8 + (lane & 3) * 2
                    Cs[r, c], Cs[r, c + 1], Cs[r + 8, c], Cs[r + 8, c + 1] = regs[lane]
            C[m0 : m0 + BM, n0 : n0 + BN] = Cs
    return C


@pytest.mark.parametrize("bm, bn", [(64, 64), (64, 128), (128, 128)])
def test_mma_kernel_index_math_gives_the_product(bm, bn):
    rng = np.random.default_rng(bm + bn)
    A = rng.integers(-4, 5, (bm, 2 * BK)).astype(float)  # small integers: the product is exact
    W = rng.integers(-4, 5, (2 * BK, 2 * bn)).astype(float)
    np.testing.assert_array_equal(emulate_mma(A, W, bm, bn), A @ W)


def test_mma_swizzle_spreads_each_ldmatrix_phase_over_the_32_banks():
    """Eight consecutive staged rows at one logical 16-byte chunk land in eight different 4-bank
    groups (A: 4 chunks per row, W: BN/8 per row), so no ldmatrix phase has a bank conflict —
    without padding (S stays the chapter's)."""
    for r0 in range(0, 128, 8):
        for c in range(4):
            groups = {((r * 4 + (c ^ ((r >> 1) & 3))) % 8) for r in range(r0, r0 + 8)}
            assert len(groups) == 8
    for cw in (8, 16):
        for r0 in range(0, BK, 8):
            for c in range(cw):
                assert len({(r * cw + (c ^ (r & 7))) % 8 for r in range(r0, r0 + 8)}) == 8


def test_tensor_core_tiles_use_the_chapters_shared_memory_budget():
    """S = 2mk + 2kn + 4mn: the kernel's dynamic shared memory is the tile model's, so the residency
    the chapter argues about (fewer resident blocks for bigger tiles) is what the H200 runs."""
    src = KERNEL_SRC.read_text()
    for kname, bm, bn, engine in TILE_KERNELS:
        assert f"void __launch_bounds__(256) {kname}(" in src
        if engine == "tensor":
            assert mma_smem_bytes(bm, bn) == tile_smem_bytes(bm, bn, 32, stage=2, acc=4)
    assert mma_smem_bytes(128, 128) == 80 * 1024 and mma_smem_bytes(64, 64) == 24 * 1024
    assert (
        re.search(r"ks_mma_impl<128, 128>", src)
        and "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in src
    )


# ---- transposes at equal block size
# ----------------------------------------------------------------------------


def test_equal_block_transposes_have_256_threads_and_the_same_occupancy():
    from analyzers.gpus import get_gpu
    from analyzers.occupancy import occupancy

    h200 = get_gpu("H200")
    src = KERNEL_SRC.read_text()
    equal = [k for k in TRANSPOSE_KERNELS if k[3] == 256]
    assert {t for _, t, _, _ in equal} == {16, 32, 64} and len(equal) == 6
    occ = set()
    for kname, tile, pad, threads in equal:
        rows = threads // tile
        assert tile * rows == 256 and tile % rows == 0
        m = re.search(rf"void {kname}\(.*ks_transpose_rows_impl<(\d+), (\d+), (\d)>", src)
        assert m and (int(m[1]), int(m[2]), int(m[3])) == (tile, rows, int(pad))
        occ.add(occupancy(h200, 256, 32, smem_static_bytes=tile * (tile + pad) * 4).occupancy_pct)
        # the transposed read's bank conflicts, as the case model computes them
        assert (
            transpose_read_degree(tile, int(pad)).degree
            == {(16, 0): 8, (16, 1): 2, (32, 0): 32, (32, 1): 1, (64, 0): 32, (64, 1): 1}[
                (tile, int(pad))
            ]
        )
    assert occ == {100.0}


# ---- the C++ launch floor
# ----------------------------------------------------------------------------------------


def test_parse_launch_floor_output():
    from collectors.bench.cases_submission import parse_launch_floor

    d = parse_launch_floor(
        'warming up\n{"submit": [2.1e-06, 2.0e-06], "back_to_back": [2.2e-06, '
        "2.1e-06], "
        '"launch_sync": [5e-06], "launches": 2000, "runtime": 13000, "driver": '
        "13000}\n"
    )
    assert d["launches"] == 2000 and d["back_to_back"] == [2.2e-06, 2.1e-06]
    with pytest.raises(ValueError, match="printed nothing"):
        parse_launch_floor("")
    with pytest.raises(ValueError, match="lacks 'launch_sync'"):
        parse_launch_floor(json.dumps({"submit": [1], "back_to_back": [1], "launches": 1}))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the CUDA toolkit's nvcc")
def test_launch_floor_program_builds_with_nvcc(tmp_path):
    from collectors.bench.cases_submission import build_launch_floor

    exe = build_launch_floor(str(tmp_path))
    assert (tmp_path / "ks_launch_floor").is_file() and exe.endswith("ks_launch_floor")


def test_cxx_launch_floor_records(monkeypatch, tmp_path):
    """With the program replaced by a script printing what it prints, the case emits the three C++
    records and the ceiling `launch_cxx_back_to_back` (resource launch_cxx), with the launcher
    named."""
    from analyzers.ceilings import classify_ceiling
    from collectors.bench import cases_submission as cs

    script = tmp_path / "fake_launch_floor"
    script.write_text(
        '#!/bin/sh\necho \'{"submit": [2.0e-06, 2.1e-06, 2.0e-06], "back_to_back": [2.5e-06, '
        '2.6e-06, 2.5e-06], "launch_sync": [6e-06, 6.1e-06], "launches": 2000, "runtime": 13000, '
        '"driver": 13000}\'\n'
    )
    script.chmod(0o755)
    monkeypatch.setattr(cs, "build_launch_floor", lambda out_dir: str(script))

    class Ctx:
        device, records = 0, []

        def emit(self, r):
            self.records.extend([r] if isinstance(r, dict) else r)

    ctx = Ctx()
    cs.cxx_launch_floor(ctx, 2000, 3)
    by = {(r["case"], r["metric"]): r for r in ctx.records}
    b2b = by[("launch.overhead", "back_to_back_time_per_launch")]
    assert b2b["value"] == 2.5e-06 and b2b["params"]["launcher"].startswith("C++") and b2b["n"] == 3
    ceil = by[("ceiling", "launch_cxx_back_to_back")]
    assert ceil["value"] == 2.5e-06 and classify_ceiling(ceil["metric"], "s") == "launch_cxx"
    assert classify_ceiling("kernel_event_floor", "s") == "kernel"
    assert classify_ceiling("host_memcpy_bandwidth", "B/s") == "host_memcpy"


# ---- the staging path of a pageable copy, with numpy in place of torch
# ---------------------------------------------


class _Pinned:
    """A pinned host tensor: numpy() is its memory."""

    def __init__(self, n):
        self.a = np.zeros(n, dtype=np.float32)

    def numpy(self):
        return self.a

    def __getitem__(self, sl):
        return self.a[sl]


class _Dst:
    """A device tensor: copy_ records the order and copies what the pinned buffer holds *now* (a DMA
    that reads the buffer later would see a refilled one: the events must prevent that)."""

    def __init__(self, n, log):
        self.a, self.log = np.full(n, np.nan, dtype=np.float32), log

    def __getitem__(self, sl):
        dst = self

        class View:
            def copy_(self, src, non_blocking=False):
                dst.log.append(("dma", sl.start))
                dst.a[sl] = src

        return View()


class _Event:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def synchronize(self):
        self.log.append(("wait", self.name))

    def record(self):
        self.log.append(("record", self.name))


def test_staged_copy_alternates_two_bounce_buffers_and_waits_before_reuse():
    from collectors.bench.cases_submission import host_memcpy_pieces, staged_copy

    src = np.arange(10 * 256, dtype=np.float32)
    log: list = []
    bufs, dst = [_Pinned(256), _Pinned(256)], _Dst(src.size, log)
    fn = staged_copy(src, bufs, dst, [_Event(log, 0), _Event(log, 1)], bounce=1024)
    fn()
    np.testing.assert_array_equal(dst.a, src)
    # piece i: wait on its buffer's event, memcpy, DMA, record — buffers 0, 1, 0, 1, ...
    assert log[:8] == [
        ("wait", 0),
        ("dma", 0),
        ("record", 0),
        ("wait", 1),
        ("dma", 256),
        ("record", 1),
        ("wait", 0),
        ("dma", 512),
    ]
    assert sum(1 for e in log if e[0] == "dma") == 10
    # the host memcpy alone: pieces into one pinned buffer (the last piece left in it)
    one = np.zeros(300, dtype=np.float32)
    host_memcpy_pieces(src, one, bounce=1200)()
    np.testing.assert_array_equal(one[: len(src) % 300 or 300], src[-(len(src) % 300 or 300) :])


def test_counter_names_match_the_analyzers_vocabulary():
    """The bench records counters under the names the predictions' mechanisms read (analyzers.cases.counters)."""
    from analyzers.cases.counters import NCU_COUNTERS
    from collectors.bench.ncu_rerun import CASE_METRICS, COUNTERS

    assert set(COUNTERS) == set(NCU_COUNTERS)
    for name, (metric, unit, scale) in COUNTERS.items():
        assert NCU_COUNTERS[name][0] == metric and NCU_COUNTERS[name][1] == scale, name
    assert {"warp_instructions", "sm_clock", "l1_hit_rate", "smem_config_bytes"} <= set(
        CASE_METRICS["tiling.traffic"]
    )


def test_one_recording_fits_in_nine_minutes():
    """The main cases start before the case budget, the last one ends within its limit, the ncu
    reruns end before the ncu deadline: a full --ncu recording ends well inside 9 minutes (the
    coordinator's single call)."""
    from collectors.bench.cases import CASES, NCU_CASES
    from collectors.bench.ncu_rerun import DEFAULT_TIMEOUT_S, TIMEOUT_S
    from collectors.bench.run import BUDGET_S

    case_budget, ncu_deadline = BUDGET_S[False]
    worst_case_end = case_budget + max(full for _, full, _ in CASES.values())
    # the ncu stage starts only before its deadline and its reruns are killed there; 60 s for
    # start-up and summary
    assert max(worst_case_end, ncu_deadline) + 60 < 9 * 60
    assert all(TIMEOUT_S.get(c, DEFAULT_TIMEOUT_S)[0] <= 180 for c in NCU_CASES)
    assert re.match(NCU_CASES["tiling.traffic"], "ks_mma_128x128")
    assert re.match(NCU_CASES["tiling.traffic"], "ks_matmul_64x64")
    assert not re.match(NCU_CASES["tiling.traffic"], "ks_occ_r8")
