"""Accurate elementary pieces shared by the exact formulas and the discrete engine.

* error-free transformations (Dekker / Knuth) for double-double arithmetic;
* the binomial log-PMF by Loader's saddle-point expansion (Stirling
  corrections and an accurate deviance), accurate to a few ulps of its terms
  for any n, where ``gammaln`` differences lose ~1e-12 relative at n = 1e4.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from . import budget

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: The unit roundoff u of IEEE double precision (Higham 2002, Sec. 2.1): |fl(x op y) - x op y| <= u |x op y|.
UNIT_ROUNDOFF = float(np.finfo(float).eps) / 2
#: The smallest positive (subnormal) double.
SMALLEST_SUBNORMAL = float(np.finfo(float).smallest_subnormal)

# log(k!) - log(sqrt(2πk) (k/e)^k) for k = 0..15 (k = 0 by convention).
STIRLERR_SMALL = np.array([
    0.0, 0.08106146679532726, 0.0413406959554093, 0.02767792568499834,
    0.020790672103765093, 0.016644691189821193, 0.013876128823070748,
    0.01189670994589177, 0.010411265261972096, 0.009255462182712733,
    0.00833056343336287, 0.007573675487951841, 0.00694284010720953,
    0.006408994188004207, 0.0059513701127588475, 0.005554733551962801,
])


def two_sum(x: NDArray | float, y: NDArray | float) -> tuple[NDArray | float, NDArray | float]:
    """s, e with s + e = x + y exactly."""
    s = x + y
    v = s - x
    return s, (x - (s - v)) + (y - v)


def split(x: NDArray | float) -> tuple[NDArray | float, NDArray | float]:
    """Dekker's split of x into two 26-bit halves."""
    c = 134217729.0 * x
    hi = c - (c - x)
    return hi, x - hi


def two_prod(x: NDArray | float, y: NDArray | float) -> tuple[NDArray | float, NDArray | float]:
    """p, e with p + e = x * y exactly."""
    p = x * y
    xh, xl = split(x)
    yh, yl = split(y)
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def _stirling_series(k: NDArray | float) -> NDArray | float:
    """The Stirling series 1/(12k) - 1/(360k^3) + ... of log(k!) − log(sqrt(2πk)(k/e)^k), for k >= 16."""
    s = 1.0 / (k * k)
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - s / 1188) * s) * s) * s) / k


#: Integers below which :func:`stirlerr` reads its values from :data:`STIRLERR_TABLE`.
STIRLERR_TABLE_SIZE = 4096
#: stirlerr(k) for k = 0..STIRLERR_TABLE_SIZE - 1: STIRLERR_SMALL, then the Stirling series (the same values
#: the series gives, looked up).
STIRLERR_TABLE = np.concatenate((STIRLERR_SMALL, _stirling_series(np.arange(16.0, STIRLERR_TABLE_SIZE))))


def stirlerr(k: NDArray | float) -> NDArray:
    """log(k!) − log(sqrt(2πk)(k/e)^k) for integers k >= 1 (Stirling series for k > 15)."""
    k = np.asarray(k, dtype=float)
    if k.size and float(k.max()) < STIRLERR_TABLE_SIZE:
        return STIRLERR_TABLE[k.astype(np.intp)]
    series = _stirling_series(np.maximum(k, 16.0))
    return np.where(k > 15, series, STIRLERR_SMALL[np.minimum(k, 15).astype(np.intp)])


def _scalar_stirlerr(k: float) -> float:
    """:func:`stirlerr` of one integer k >= 0 (the same series and table, in Python floats)."""
    return float(_stirling_series(k)) if k > 15 else float(STIRLERR_SMALL[int(k)])


#: |v| below which :func:`bd0` sums its series: beyond, the direct form's cancellation costs at most about
#: 1 / (2 v^2) = 8 ulps of the deviance.
BD0_NEAR = 0.25
#: 1 / (2i + 1) for i = 1..13, highest first: the series of :func:`bd0` in v^2, by Horner's rule (the terms
#: left out, 2k |v|^29 / 29 and beyond, stay below 2 |v|^27 / 29 < 2^-57 of the deviance for |v| < BD0_NEAR).
_BD0_SERIES = tuple(1.0 / (2 * i + 1) for i in range(13, 0, -1))


def bd0(k: NDArray, n: int, p: NDArray | float) -> NDArray:
    """Deviance k·log(k/(np)) + np − k, accurate near k = np (n·p kept exact); ``p`` a float or an array
    broadcasting against ``k`` (e.g. a column of probabilities, one per row of ``k``)."""
    k = np.asarray(k, dtype=float)
    p = np.asarray(p, dtype=float)
    parts = [two_prod(float(n), float(one)) for one in p.ravel()]  # n p = m + m_err exactly
    m = np.array([part[0] for part in parts]).reshape(p.shape)
    m_err = np.array([part[1] for part in parts]).reshape(p.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _deviance(k, m, m_err)


def _deviance(k: NDArray, m: NDArray | float, m_err: NDArray | float) -> NDArray:
    """:func:`bd0` of counts ``k`` against means m + m_err (m_err the rounding of m = n p), under the caller's
    np.errstate (the direct form divides by zero at k = 0)."""
    d = (k - m) - m_err
    v = d / (k + m)
    near = np.abs(v) < BD0_NEAR
    # 2k·atanh(v) − d = d·v + 2k·v·Σ_{i>=1} v^{2i}/(2i+1)  (v = d/(k+m)), the sum to i = 13 by Horner's rule
    v2 = v * v
    series = v2 * _BD0_SERIES[0]
    series += _BD0_SERIES[1]
    for coefficient in _BD0_SERIES[2:]:
        series *= v2
        series += coefficient
    series *= v2
    series *= 2.0 * k * v
    series += d * v
    if near.all():
        return series
    direct = k * np.log(k / m) + (m - k)
    return np.where(near, series, direct)


def binomial_log_pmf(
    j: NDArray, n: int, p: float, q: float, log_p: float, log_q: float
) -> NDArray:
    """log C(n,j) p^j q^{n−j} (p + q = 1) by Loader's saddle-point expansion:
    errors of a few ulps of its terms, also for n = 1e6 and beyond.

    log C(n, k) p^k q^(n-k) = stirlerr(n) - log sqrt(2π) + log(n)/2 - sum over c in (k, n - k) of
    (stirlerr(c) + bd0(c, n p_c) + log(c)/2), p_c = p for k and q for n - k (Loader 2000); both counts
    are processed as the two rows of one array.
    """
    j = np.asarray(j, dtype=float)
    k = np.minimum(np.maximum(j.ravel(), 1.0), max(n - 1.0, 1.0))
    both = np.empty((2, k.size))
    both[0] = k
    np.subtract(n, k, out=both[1])
    (m_p, err_p), (m_q, err_q) = two_prod(float(n), float(p)), two_prod(float(n), float(q))
    constant = _scalar_stirlerr(float(n)) - LOG_SQRT_2PI + 0.5 * math.log(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_count = _deviance(both, np.array(((m_p,), (m_q,))), np.array(((err_p,), (err_q,))))
        per_count += stirlerr(both)
        per_count += 0.5 * np.log(both)
    inner = (constant - per_count.sum(axis=0)).reshape(j.shape)
    return np.where(j == 0, n * log_q, np.where(j == n, n * log_p, inner))


def binomial_log_tails(k: int, n: int, p: float) -> tuple[float, float]:
    """(log Pr[X <= k], log Pr[X > k]) for X ~ Binom(n, p), 0 <= p <= 1.

    From the regularised incomplete beta function, Pr[X > k] = I_p(k + 1, n - k) (scipy.special's ``betainc``
    and its complement ``betaincc``, accurate to a few ulps where Cephes' ``bdtr`` loses 1e-10 relative at
    n = 6e4), the smaller probability directly and the larger as log1p of minus the smaller (no
    cancellation); a probability that
    underflows is summed instead from the log-PMF (:func:`binomial_log_pmf`) of the terms next to ``k``: so
    far out in a tail each term is below 1e-300 of the previous ones' scale, the sum of 4096 of them, with
    the geometric rest, is exact to rounding.
    """
    from scipy.special import betainc, betaincc
    if k < 0:
        return -math.inf, 0.0
    if k >= n:
        return 0.0, -math.inf
    if p == 0 or p == 1:
        return (0.0, -math.inf) if p == 0 else (-math.inf, 0.0)
    below, above = float(betaincc(k + 1, n - k, p)), float(betainc(k + 1, n - k, p))
    logs = []
    for value, first, last in ((below, max(k - 4095, 0), k), (above, k + 1, min(k + 4096, n))):
        if value > 0:
            logs.append(math.log(value))
            continue
        j = np.arange(first, last + 1, dtype=float)
        terms = binomial_log_pmf(j, n, p, 1 - p, math.log(p), math.log1p(-p))
        logs.append(float(log_sum_exp(terms)))
    if below < above:
        return logs[0], math.log1p(-below)
    return math.log1p(-above), logs[1]


def complex_log1p(z: NDArray) -> NDArray:
    """log(1 + z) for complex z, accurate when |z| is small.

    numpy's complex ``log1p`` loses the real part for small z (log1p(1e-12 + 1e-10j)
    has real part wrong in the 5th digit); here Re = log1p(2x + x^2 + y^2) / 2 for
    |z| < 1/2, log|1 + z| otherwise, and Im = atan2(y, 1 + x): accurate for
    accurate x = Re z, y = Im z.
    """
    z = np.asarray(z, dtype=complex)
    x, y = z.real, z.imag
    small = np.abs(z) < 0.5  # elsewhere |1 + z| is formed without cancellation
    modulus = np.empty(x.shape)
    modulus[small] = 0.5 * np.log1p(2 * x[small] + x[small] ** 2 + y[small] ** 2)
    with np.errstate(divide="ignore"):
        modulus[~small] = np.log(np.hypot(1 + x[~small], y[~small]))
    return modulus + 1j * np.arctan2(y, 1 + x)


#: Entries per block of :func:`suffix_recurrence`'s blocked scan.
SUFFIX_BLOCK = 64


def suffix_recurrence(values: NDArray, decay: float, gain: float = 1.0) -> NDArray:
    """y_c = gain * (values_c + decay * y_{c+1}) from the last entry down (y past the end is 0): the suffix
    sums sum_{i >= c} gain^{i - c + 1} decay^{i - c} values_i of positive terms.

    A blocked scan in numpy (:func:`_blocked_suffix_sums`, about 2 n log2(SUFFIX_BLOCK) operations): every term
    reaches y_c through O(log n) additions and multiplications by powers of r = gain * decay, each rounded once,
    so its relative rounding stays far below the n u of the term-by-term recurrence; every factor is at most 1,
    so no partial product falls below what the true term is (masses near 1e-300 keep their accuracy).
    """
    z = np.array(values, dtype=float).ravel()
    ratio = gain * decay
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"gain * decay must be in [0, 1], got {ratio!r}")
    z = _blocked_suffix_sums(z, ratio)
    return gain * z if gain != 1.0 else z


def _blocked_suffix_sums(z: NDArray, ratio: float) -> NDArray:
    """sum_{i >= c} ratio^(i - c) z_i over blocks of B = SUFFIX_BLOCK entries: within each block the
    recurrence L_j = z_j + ratio L_{j+1}, run on all blocks at once (column by column of the blocks laid out
    side by side); the blocks' own sums Y_k = L_{k,0} + ratio^B Y_{k+1} by the same scan one level down;
    then y_c = L_{k,j} + ratio^(B - j) Y_{k+1}.  A term at distance d meets about 2 d / B + 2 log_B(n)
    roundings more than within its block, so its relative error stays below the recurrence's 2 d u."""
    n, block = z.size, SUFFIX_BLOCK
    if n <= block or ratio == 0.0:
        return _doubling_suffix_sums(z, ratio)
    rows = -(-n // block)
    padded = np.zeros(rows * block)
    padded[:n] = z
    columns = np.ascontiguousarray(padded.reshape(rows, block).T)  # columns[j, k] = entry j of block k
    for j in range(block - 2, -1, -1):
        columns[j] += ratio * columns[j + 1]
    starts = _blocked_suffix_sums(columns[0].copy(), ratio ** block)
    columns[:, :-1] += ratio ** np.arange(block, 0, -1, dtype=float)[:, None] * starts[None, 1:]
    return columns.T.ravel()[:n]


def _doubling_suffix_sums(z: NDArray, ratio: float) -> NDArray:
    """sum_{i >= c} ratio^(i - c) z_i in place by doubling: after the pass with shift s each z_c holds the
    window [c, c + 2s), and z_c += ratio^s z_{c+s} doubles it (log2 n passes)."""
    shift, factor = 1, ratio
    while shift < z.size and factor > 0.0:
        z[:-shift] += factor * z[shift:]
        shift, factor = 2 * shift, factor * factor
    return z


def log_sum_exp(values: NDArray, axis: int | None = 0) -> NDArray:
    """log(sum(exp(values))) over ``axis`` (None: all values; -inf where every value is -inf or there are none),
    in plain numpy (scipy's logsumexp costs about 0.4 ms a call in its array-API dispatch, which searches
    repeat)."""
    values = np.asarray(values, dtype=float)
    if axis is None or values.ndim == 1:
        values, axis = values.ravel(), 0
        if values.size == 0:
            return np.float64(-np.inf)
        # one row: its largest value and the scaled sum in Python floats (a few numpy calls)
        largest = float(values.max())
        largest = largest if math.isfinite(largest) else 0.0
        total = float(np.exp(values - largest).sum())
        return np.float64(math.log(total) + largest if total > 0 else (-math.inf if total == 0 else math.nan))
    if values.shape[axis] == 0:
        return np.full(values.shape[:axis] + values.shape[axis + 1:], -np.inf)[()]
    with np.errstate(divide="ignore", invalid="ignore"):
        top = np.max(values, axis=axis, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        return (np.log(np.sum(np.exp(values - top), axis=axis)) + np.squeeze(top, axis=axis))[()]


def normalize(log_weights: NDArray) -> tuple[float, NDArray]:
    """(log W, w / W) for positive weights given by their logs, W their sum."""
    shift = float(np.max(log_weights))
    weights = np.exp(log_weights - shift)
    total = float(np.sum(weights))
    return shift + math.log(total), weights / total


def weighted_cumulants(values: NDArray, log_weights: NDArray) -> tuple[float, float]:
    """Mean and variance of ``values`` under the weights exp(``log_weights``), normalised."""
    weights = normalize(log_weights)[1]
    mean = float(np.dot(weights, values))
    return mean, float(np.dot(weights, (values - mean) ** 2))


def log_characteristic(t: NDArray, values: list[NDArray], weights: list[NDArray],
                       log_totals: list[float]) -> NDArray:
    """log sum_j W w_j e^{i t v_j} of several finite measures at once, for real or complex ``t``.

    Measure m has atoms ``values[m]`` with normalised weights ``weights[m]``
    (summing to one) and total mass exp(``log_totals[m]``); the result has shape
    ``t.shape + (len(values),)``.  Each is formed as
    log W + log1p(sum_j w_j expm1(i t v_j)), so that a log-CF multiplied by a
    huge count keeps its relative accuracy near t = 0 (which is also why log W
    should be exact where the caller knows it: a probability vector has
    W = 1 - mass at infinity); all measures share one matrix of exponentials.
    """
    t = np.asarray(t)
    t = t if np.iscomplexobj(t) else t.astype(float)  # complex t: the MGF along a contour
    sizes = np.array([v.size for v in values])
    all_values, all_weights = np.concatenate(values), np.concatenate(weights)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    flat = t.ravel()
    deviation = np.empty((flat.size, len(values)), dtype=complex)
    chunk = max(1, 4_000_000 // all_values.size)
    for start in range(0, flat.size, chunk):
        budget.check("evaluating finite-output mechanisms' characteristic functions")
        terms = np.expm1(1j * np.multiply.outer(flat[start:start + chunk], all_values)) * all_weights
        deviation[start:start + chunk] = np.add.reduceat(terms, starts, axis=1)
    result = np.asarray(log_totals) + complex_log1p(deviation)
    return result.reshape(t.shape + (len(values),))


def expm1_minus_identity(z: NDArray) -> NDArray:
    """e^z - 1 - z for complex z, accurate for small |z| (Taylor series below |z| = 1/2)."""
    z = np.asarray(z, dtype=complex)
    small = np.abs(z) < 0.5
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.expm1(z) - z
    if np.any(small):
        zs = z[small]
        radius = float(np.max(np.abs(zs)))
        # Horner on z^2 (1/2! + z/3! + ...), to the order where the next term is below 1e-18 relative.
        order, term = 2, 1.0
        while term > 1e-18 and order < 24:
            order += 1
            term *= radius / order
        series = np.full(zs.shape, 1.0 / math.factorial(order), dtype=complex)
        for n in range(order - 1, 1, -1):
            series = series * zs + 1.0 / math.factorial(n)
        out[small] = series * zs * zs
    return out


#: Longest dot product :func:`direct_convolve` hands to numpy at once.  numpy's convolution of doubles forms
#: each output as a BLAS dot product, and OpenBLAS (numpy's usual BLAS) runs dot products longer than about
#: 10 000 on several threads: repeated for every output point on a machine whose cores are busy, that slows a
#: convolution by orders of magnitude (on this project's 2-core machine beside two busy processes, 12 000 by
#: 12 000 values took 5 times as long with the default threads as with one; 10 000 by 10 000 the same).
DOT_CHUNK = 8192


def direct_convolve(first: NDArray, second: NDArray, task: str = "a direct convolution") -> NDArray:
    """``np.convolve(first, second)`` (full mode) of two 1-d float arrays, with no dot product longer than
    DOT_CHUNK: the shorter vector is cut into pieces of at most DOT_CHUNK values, each piece convolved with
    the longer one and added at its offset, with the time budget checked between pieces (``task`` names
    the work in a budget error).

    Every output is the same sum of products as numpy's, in another order: a rounding bound that holds
    for any summation order (e.g. (m + 1) u relative for m nonnegative products) holds here too.

    Examples
    --------
    >>> import numpy as np
    >>> from afa._accurate import direct_convolve
    >>> direct_convolve(np.array([1.0, 2.0]), np.array([1.0, 1.0, 1.0]))
    array([1., 3., 3., 2.])
    """
    short, long = (first, second) if first.size <= second.size else (second, first)
    if short.size <= DOT_CHUNK:
        return np.convolve(first, second)
    out = np.zeros(first.size + second.size - 1, dtype=np.result_type(first, second))
    for start in range(0, short.size, DOT_CHUNK):
        budget.check(task)
        piece = short[start:start + DOT_CHUNK]
        out[start:start + piece.size + long.size - 1] += np.convolve(piece, long)
    return out
