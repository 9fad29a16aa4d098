"""The chapter's numerical cases, run for real on the CPU with numpy (float32 arithmetic, float64
references).

- `non_associativity()`: (1 + 2⁻²⁴) + 2⁻²⁴ = 1 but 1 + (2⁻²⁴ + 2⁻²⁴) = 1 + 2⁻²³ in FP32 (Figure
  5-13).
- `segment_sum_ulp(...)`: rows of BF16 values, squares summed in FP32 with s segments (each segment
  summed in order, then the partial sums in order), error in ULP of the float64 reference (Figure
  5-13).
- `online_softmax(...)`: the (m, ℓ, u) state of Example 5-6 / Exercise 5-3, checked against a
  float64 direct softmax.
- `illegal_moves_demo()`, `fp8_row_quantize(...)`: the §5.4 numerical points made concrete.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


# ------------------------------------------------------------------------------------------------
# Non-associativity and BF16
# ------------------------------------------------------------------------------------------------


def non_associativity() -> dict[str, float]:
    """Both groupings of 1 + 2⁻²⁴ + 2⁻²⁴ in float32, and the float64 value."""
    one, e = np.float32(1.0), np.float32(2.0**-24)
    left = (one + e) + e
    right = one + (e + e)
    return {
        "left": float(left),
        "right": float(right),
        "exact": 1.0 + 2.0**-23,
        "difference": float(right) - float(left),
    }


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to BF16 (round to nearest even), returned as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def random_bf16_rows(rows: int, length: int, seed: int = 0) -> np.ndarray:
    """Rows of BF16 values whose squares average 0.5 (x = ±sqrt(u), u uniform in [0, 1)). The
    chapter says only 'each square ≈ 0.5'; this generator reproduces the magnitude of its −175.2 /
    −9.2 ULP row."""
    rng = np.random.default_rng(seed)
    u = rng.random((rows, length))
    sign = rng.choice(np.array([-1.0, 1.0]), size=(rows, length))
    return to_bf16((sign * np.sqrt(u)).astype(np.float32))


def segmented_sum_f32(values: np.ndarray, segments: int) -> np.ndarray:
    """Per row: split into `segments` contiguous segments (sizes differ by at most one, like
    numpy.array_split), sum each in order in float32, then sum the partial sums in order in float32."""
    rows, length = values.shape
    if not 1 <= segments <= length:
        raise ValueError(f"segments={segments} must be between 1 and the row length {length}")
    sizes = np.full(segments, length // segments)
    sizes[: length % segments] += 1
    width = int(sizes.max())
    padded = np.zeros((rows, segments, width), dtype=np.float32)  # zeros add exactly
    start = 0
    for s, size in enumerate(sizes):
        padded[:, s, :size] = values[:, start : start + size]
        start += size
    partial = np.cumsum(padded, axis=2, dtype=np.float32)[:, :, -1]
    return np.cumsum(partial, axis=1, dtype=np.float32)[:, -1]


@dataclass(frozen=True)
class UlpStats:
    segments: int
    median: float
    mean: float
    p1: float
    p5: float
    p95: float
    p99: float
    median_abs: float
    max_abs: float

    def to_row(self) -> dict:
        return {
            "segments": self.segments,
            "median_ulp": self.median,
            "mean_ulp": self.mean,
            "p1_ulp": self.p1,
            "p5_ulp": self.p5,
            "p95_ulp": self.p95,
            "p99_ulp": self.p99,
            "median_abs_ulp": self.median_abs,
            "max_abs_ulp": self.max_abs,
        }


def segment_sum_ulp(
    rows: int = 200, length: int = 4096, segment_counts=(1, 8), seed: int = 0
) -> dict[int, np.ndarray]:
    """ULP error (signed, in units of the float32 spacing at the float64 reference) of the FP32 sum
    of squares of each random BF16 row, for each segment count. Returns {segments: errors[rows]}."""
    if rows < 1 or length < 1:
        raise ValueError("rows and length must be >= 1")
    x = random_bf16_rows(rows, length, seed)
    sq = (x * x).astype(np.float32)  # exact: a BF16 square fits in FP32
    ref = sq.astype(np.float64).sum(axis=1)
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return {
        int(s): (segmented_sum_f32(sq, int(s)).astype(np.float64) - ref) / ulp
        for s in segment_counts
    }


def ulp_stats(errors: dict[int, np.ndarray]) -> list[UlpStats]:
    out = []
    for s, e in errors.items():
        a = np.abs(e)
        q = np.percentile(e, [1, 5, 50, 95, 99])
        out.append(
            UlpStats(
                s,
                float(q[2]),
                float(e.mean()),
                float(q[0]),
                float(q[1]),
                float(q[3]),
                float(q[4]),
                float(np.median(a)),
                float(a.max()),
            )
        )
    return out


# ------------------------------------------------------------------------------------------------
# Online softmax
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SoftmaxStep:
    block: int
    score: float
    value: float
    m: float  # running max m'
    r: float  # rescale factor e^(m - m')
    p: float  # e^(s - m')
    l: float  # ℓ' = r·ℓ + p
    u: float  # u' = r·u + p·V
    out: float  # u'/ℓ'


def online_softmax(scores, values) -> list[SoftmaxStep]:
    """Process (score, value) pairs one per block, keeping the running max m, ℓ = Σ e^(s - m) and u
    = Σ e^(s - m)·V. When the max grows, ℓ and u are both rescaled by r = e^(m - m'). Output = u/ℓ."""
    scores, values = list(map(float, scores)), list(map(float, values))
    if len(scores) != len(values) or not scores:
        raise ValueError("scores and values need the same, non-zero length")
    m, l, u = -math.inf, 0.0, 0.0
    steps = []
    for i, (s, v) in enumerate(zip(scores, values), start=1):
        m_new = max(m, s)
        r = math.exp(m - m_new) if m != -math.inf else 0.0
        p = math.exp(s - m_new)
        l = r * l + p
        u = r * u + p * v
        m = m_new
        steps.append(SoftmaxStep(i, s, v, m, r, p, l, u, u / l))
    return steps


def direct_softmax(scores, values) -> float:
    """Σ softmax(s)_i · V_i in float64, the reference for `online_softmax`."""
    s = np.asarray(scores, dtype=np.float64)
    w = np.exp(s - s.max())
    return float((w / w.sum()) @ np.asarray(values, dtype=np.float64))


# ------------------------------------------------------------------------------------------------
# §5.4: illegal moves and FP8 row scales
# ------------------------------------------------------------------------------------------------


def _silu(x):
    return x / (1.0 + np.exp(-x))


def illegal_moves_demo() -> list[dict]:
    """Three transformations the chapter forbids, each with an input that tells before from after."""
    a, b = 2.0, -1.5  # two partial sums of one reduction
    c = np.float32(1.00390625 + 2.0**-10)  # exact in FP32, not in BF16
    silu_c_fp32 = float(_silu(np.float32(c)))
    silu_c_bf16 = float(_silu(to_bf16(np.array([c], np.float32))[0]))
    return [
        {
            "move": "SiLU moved into the reduction",
            "changes": "the mathematics",
            "before": float(_silu(a + b)),
            "after": float(_silu(a) + _silu(b)),
            "input": f"partial sums {a} and {b}",
        },
        {
            "move": "BF16 rounding of C dropped",
            "changes": "the numerical rounding",
            "before": silu_c_bf16,
            "after": silu_c_fp32,
            "input": f"C = {float(c)!r} (not a BF16 number)",
        },
        {
            "move": "softmax by blocks without (m, ℓ)",
            "changes": "the mathematics",
            "before": float(math.exp(1) / (math.exp(1) + math.exp(3))),
            "after": 1.0,
            "input": "blocks [1] and [3]: each normalises to 1, the true weight of 1 is e/(e + e³)",
        },
    ]


E4M3_MAX = 448.0


def quantize_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to the nearest FP8 E4M3FN value (3 mantissa bits, subnormal step 2⁻⁹, saturating at ±448)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), E4M3_MAX)
    e = np.floor(np.log2(np.maximum(a, 2.0**-6)))
    step = 2.0 ** (e - 3)
    q = np.round(a / step) * step
    return np.sign(x) * np.minimum(q, E4M3_MAX)


def fp8_row_quantize(row: np.ndarray, scale_from: int | None = None) -> dict:
    """Quantise one row with scale = max|x| / 448. With `scale_from` = n, the scale comes from the
    first n elements only (what a kernel that cannot see the whole row would do): larger values then
    clip."""
    row = np.asarray(row, dtype=np.float64)
    seen = row if scale_from is None else row[:scale_from]
    amax = float(np.abs(seen).max())
    scale = amax / E4M3_MAX if amax else 1.0
    q = quantize_e4m3(row / scale) * scale
    clipped = int(np.sum(np.abs(row / scale) > E4M3_MAX))
    rel = np.abs(q - row) / np.maximum(np.abs(row), 1e-30)
    return {
        "scale": scale,
        "clipped": clipped,
        "max_rel_error": float(rel.max()),
        "median_rel_error": float(np.median(rel)),
    }
