"""Independent references for Poisson- and subset-subsampled Gaussian / Laplace mechanisms.

Nothing here imports afa: the module is a second, unrelated implementation
that the library is tested against.

Pairs (output o real, Delta = sensitivity, mu = N(0, sigma^2) or Laplace(0, b))
-------------------------------------------------------------------------------
Poisson subsampling with probability q (Zhu, Dong & Wang 2022, Thm 11,
Google DP team 2025, Sec. 4.1 and 4.2):

    relation="remove":        P = (1-q) mu(o) + q mu(o - Delta),  Q = mu(o)
    relation="add":           P = mu(o),  Q = (1-q) mu(o) + q mu(o - Delta)
    relation="substitution":  P = (1-q) mu(o) + q mu(o + Delta),
                              Q = (1-q) mu(o) + q mu(o - Delta)   (symmetric)

The privacy loss is L = log(P/Q)(o) with o ~ P, and for k-fold composition
delta(eps) = E[(1 - e^{eps - L_1 - ... - L_k})_+].  The add/remove mechanism's
delta is the maximum over "remove" and "add" (relation="add_remove" in the
delta functions).

Subset subsampling (sampling m of n without replacement, gamma = m/n;
Zhu, Dong & Wang 2022, Thm 11 (2)): with the replace-dominating pair (P, Q) =
(mu(o), mu(o - Delta_r)) of the base mechanism (Delta_r = replace-sensitivity),
((1-gamma) P + gamma Q, P) (removal) and (P, (1-gamma) P + gamma Q) (add) are
exactly the "remove" / "add" pairs above with q = gamma, Delta = Delta_r.  So
every function below covers subset subsampling by passing q = gamma,
sensitivity = Delta_r.

All losses are formed in the cancellation-free "ratio" form
    log P(o) = log mu(o) + K_P(o),   K_P(o) = log sum_i w_i exp(kappa(o, c_i)),
    kappa(o, c) = log mu(o - c) - log mu(o) = c (2 o - c) / (2 sigma^2)   (Gaussian)
                                            = (|o| - |o - c|) / b          (Laplace)
so L = K_P - K_Q keeps its absolute accuracy far into the tails.

1. ``log_mgf_mpmath(s, ...)``: log M(s), M(s) = int P^{1+s} Q^{-s} do = E_P[e^{s L}]
   (s real or complex; mpmath.quad at ``dps`` digits).  The integrand is divided
   by its numerically located peak magnitude before integrating (mp.quad's
   tolerance is absolute), the region where it exceeds peak * 10^{-(dps+10)} is
   split at every kink (Laplace) and wherever log|f| or arg f has changed by 8
   since the last breakpoint, and the tails to +-inf are integrated too.  For
   complex s the imaginary part of the result is the principal branch
   (-pi, pi] of log of the integral, plus nothing: compare exp() or reduce
   mod 2 pi.

2. ``delta_one_use_mpmath(eps, ...)``: int (P - e^eps Q)_+ do with the integrand
   written P (1 - e^{eps - L}) (no cancellation), split at the numerically
   refined roots of L(o) = eps (and the kinks), same peak scaling.

3. ``delta_bracket_bruteforce(eps, k, ...)``: a pessimistic / optimistic PLD on
   the loss grid h Z, composed k times, giving a bracket lower <= delta <= upper.
   One use: on every monotone piece of L(o) the preimages o_j of the grid
   losses j h are found (table + safeguarded Newton), so each output cell
   (o_j, o_{j+1}] has losses in [j h, (j+1) h] exactly; its P-mass (from the
   normal / Laplace CDFs, taken from the near tail side) is put at (j+1) h
   (pessimistic) or j h (optimistic).  Constant pieces (Laplace) are atoms
   rounded up / down.  Output tails beyond the points where the P-mass is
   below ``tail`` (1e-30) are put at +infinity / the loss at the truncation
   point (pessimistic) or at the truncation loss / dropped (optimistic),
   whichever is the safe side for the direction of monotonicity.
   Composition: repeated squaring, FFT (scipy.fft) or np.convolve for short
   arrays.  After every convolution the outer tails of mass <= ``compose_tail``
   (1e-14) are trimmed: pessimistic moves the upper tail to +infinity and the
   lower tail onto the lowest kept atom, optimistic drops both -- exact
   one-sided moves, so the bracket stays valid.
   Rounding: a bound on the sup-norm of the CDF error (in loss order) of each
   side is carried along (CDF-difference rounding 128 u per monotone piece,
   preimage rounding, a standard FFT rounding bound
   3 log2(N) 5u ||a||_1 ||b||_2 sqrt(N), clipped negative FFT output), and
   since c(l) = (1 - e^{eps-l})_+ is monotone with total variation 1, delta
   moves by at most twice that; the bracket is widened accordingly (and by a
   relative 1e-12 for the final summation).  So the bracket is certified up to
   these (documented, conservative) floating-point bounds.

Observed accuracy and cost (2 shared cores, mpmath 1.3, numpy 2.4, scipy 1.17):
  * log_mgf_mpmath, dps=30 (works at dps+10 = 40 digits): M(0) = M(-1) = 1,
    the q = 1 Gaussian closed form s(1+s) Delta^2/(2 sigma^2) (real, complex,
    s = 50 where log M = 1275), the q = 1 Laplace closed form below, the
    integer moments sum_k C(n,k) (1-q)^{n-k} q^k e^{k(k-1) Delta^2/(2 sigma^2)}
    and M_remove(-1-s) = M_add(s) all agree to ~1e-40 (tests assert 1e-25).
    0.03-0.2 s a call; |Im s| = 200: ~3 s; s = 20 - 30i substitution, where
    |M(s)| / M(20) ~ 1e-116, the cancellation is detected from the error
    estimate and the integral redone at 150+ digits: ~15 s, stable to 4e-37
    between dps = 30 and 50.
  * delta_one_use_mpmath, dps=30: the q = 1 Gaussian / Laplace closed forms to
    < 1e-36 relative, down to delta ~ 1e-782.  0.03-0.15 s a call (up to ~1 s
    when eps sits on a flat Laplace loss level and signs are decided in mp).
  * bracket, k = 1, h = 1e-5, sigma=1, q=0.01, remove, eps = -0.5, 0, 0.2, 0.5, 1:
    delta = 0.393, 3.83e-3, 9.91e-6, 2.21e-7, 2.73e-9, widths 6.1e-6, 3.1e-6,
    1.7e-9, 2.3e-11, 3.7e-13 (relative 1.5e-5 .. 8e-4); always <= h, and it
    contains the mpmath value in every case tried (noise x relation x
    q in {0.01, 0.3, 1} x 6 eps).  0.1-2 s (Gaussian one use: ~1e6 cells).
  * the width is <= 2 k h (each loss moves by <= h up resp. down; <= k h when
    no loss atom sits exactly on the grid, e.g. always for Gaussian) and shrinks
    linearly: q = 1 Gaussian (sigma=2) k = 2: width(1e-4) / width(1e-5) = 10.0;
    relative widths at h = 1e-5: 1.7e-5 (delta = 0.47) .. 1.2e-4 (delta = 7e-6).
    k = 10 at h = 1e-5: Gaussian 1.9e-5 .. 2.1e-5 absolute, Laplace (atoms on
    the grid get rounded a full cell each way) 3.7e-5 .. 4.2e-5.
  * rounding allowance (2 x the carried CDF error bound): ~2e-13 for k = 1,
    ~1e-10 for k = 100 (dominated by the FFT bound).
  * sigma=1, q=0.01, Delta=1, k=100, delta=1e-5 (max over add/remove),
    literature eps = 0.718036:
      h = 1e-5: eps in [0.7175347, 0.7185366]  (1.5-3.5 s)
      h = 3e-6: eps in [0.7178846, 0.7181867]  (~10 s)
      h = 1e-6: eps in [0.7179845, 0.7180868]  (~35 s)
    (the midpoints 0.7180357, 0.7180357, 0.7180356 are much closer than the
    half-width, but only the bracket is certified).

q = 1 Laplace closed form used by the tests (a = Delta / b, derived by
splitting int Lap(o-Delta)^{1+s} Lap(o)^{-s} at 0 and Delta):
    M(s) = ((1 + s) e^{a s} + s e^{-a (1+s)}) / (1 + 2 s)
(note the + sign: this gives M(0) = M(-1) = 1).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import scipy.fft
from scipy.special import ndtr, ndtri

NOISES = ("gaussian", "laplace")
RELATIONS = ("remove", "add", "substitution")

_U = np.finfo(float).eps / 2  # unit roundoff


# --------------------------------------------------------------------------
# The pairs
# --------------------------------------------------------------------------


def _check(noise, scale, q, sensitivity, relation, allow_add_remove=False):
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}")
    rel = RELATIONS + (("add_remove",) if allow_add_remove else ())
    if relation not in rel:
        raise ValueError(f"relation must be one of {rel}")
    if not scale > 0:
        raise ValueError("scale must be > 0")
    if not 0 <= q <= 1:
        raise ValueError("q must be in [0, 1]")
    if not sensitivity >= 0:
        raise ValueError("sensitivity must be >= 0")


def _components(relation, q, delta, exact=False):
    """(P, Q) as lists of (weight, shift); weight 1 - q exactly in mp if exact."""
    one = mp.mpf(1) if exact else 1.0
    qq = mp.mpf(q) if exact else float(q)
    mix_minus = [(one - qq, 0 * one), (qq, one * delta)]   # (1-q) mu(o) + q mu(o - Delta)
    mix_plus = [(one - qq, 0 * one), (qq, -one * delta)]   # (1-q) mu(o) + q mu(o + Delta)
    pure = [(one, 0 * one)]
    if relation == "remove":
        P, Q = mix_minus, pure
    elif relation == "add":
        P, Q = pure, mix_minus
    else:
        P, Q = mix_plus, mix_minus
    P = [(w, c) for w, c in P if w != 0]
    Q = [(w, c) for w, c in Q if w != 0]
    return P, Q


def _kinks(noise, P, Q):
    if noise != "laplace":
        return []
    return sorted({0.0} | {float(c) for _, c in P} | {float(c) for _, c in Q})


# float versions -------------------------------------------------------------


def _kappa_f(noise, scale, o, c):
    if noise == "gaussian":
        return c * (2.0 * o - c) / (2.0 * scale * scale)
    o = np.clip(o, min(0.0, c), max(0.0, c))  # kappa is constant outside [0, c]: no cancellation
    return (np.abs(o) - np.abs(o - c)) / scale


def _dkappa_f(noise, scale, o, c):
    if noise == "gaussian":
        return np.full_like(o, c / (scale * scale))
    return (np.sign(o) - np.sign(o - c)) / scale


def _K_f(noise, scale, comps, o):
    """log sum_i w_i exp(kappa(o, c_i)) and its derivative (float arrays)."""
    o = np.asarray(o, dtype=float)
    terms = np.array([math.log(w) + _kappa_f(noise, scale, o, c) for w, c in comps])
    m = terms.max(axis=0)
    e = np.exp(terms - m)
    s = e.sum(axis=0)
    K = m + np.log(s)
    dK = sum(e[i] * _dkappa_f(noise, scale, o, c) for i, (_, c) in enumerate(comps)) / s
    return K, dK


def _logmu_f(noise, scale, o):
    o = np.asarray(o, dtype=float)
    if noise == "gaussian":
        return -0.5 * (o / scale) ** 2 - math.log(scale * math.sqrt(2 * math.pi))
    return -np.abs(o) / scale - math.log(2 * scale)


# mp versions ----------------------------------------------------------------


def _kappa_mp(noise, scale, o, c):
    if noise == "gaussian":
        return c * (2 * o - c) / (2 * scale * scale)
    o = min(max(o, min(0, c)), max(0, c))  # kappa is constant outside [0, c]: no cancellation
    return (abs(o) - abs(o - c)) / scale


def _K_mp(noise, scale, comps, o):
    """comps: list of (log weight, shift) in mp."""
    if len(comps) == 1:
        lw, c = comps[0]
        return lw + _kappa_mp(noise, scale, o, c)
    terms = [lw + _kappa_mp(noise, scale, o, c) for lw, c in comps]
    m = max(terms)
    return m + mp.log(mp.fsum(mp.exp(t - m) for t in terms))


def _logmu_mp(noise, scale, o, const):
    """log mu(o) with const = log(scale sqrt(2 pi)) resp. log(2 scale) precomputed."""
    if noise == "gaussian":
        return -(o / scale) ** 2 / 2 - const
    return -abs(o) / scale - const


def _mp_setup(noise, scale, q, sensitivity, relation):
    Pm, Qm = _components(relation, q, mp.mpf(sensitivity), exact=True)
    Pm = [(mp.log(w), c) for w, c in Pm]
    Qm = [(mp.log(w), c) for w, c in Qm]
    scale_m = mp.mpf(scale)
    const = mp.log(scale_m * mp.sqrt(2 * mp.pi)) if noise == "gaussian" else mp.log(2 * scale_m)
    return Pm, Qm, scale_m, const


# --------------------------------------------------------------------------
# Generic peak-scaled mp.quad over the real line
# --------------------------------------------------------------------------


def _significant_hull(g, lo, hi, T, dom=(-np.inf, np.inf), n=20001):
    """[lo', hi'] containing {g >= max g - T}, resolved by at least ~n/4 grid points."""
    for _ in range(60):
        x = np.linspace(lo, hi, n)
        with np.errstate(all="ignore"):
            gx = g(x)
        gx = np.where(np.isnan(gx), -np.inf, gx)
        gm = gx.max()
        if not np.isfinite(gm):
            return None
        idx = np.nonzero(gx >= gm - T)[0]
        i0, i1 = idx[0], idx[-1]
        width = hi - lo
        if i0 == 0 and lo > dom[0]:
            lo = max(dom[0], lo - width)
            continue
        if i1 == n - 1 and hi < dom[1]:
            hi = min(dom[1], hi + width)
            continue
        new_lo, new_hi = x[max(i0 - 2, 0)], x[min(i1 + 2, n - 1)]
        if (new_hi - new_lo) >= 0.25 * width:
            return new_lo, new_hi, x, gx
        lo, hi = new_lo, new_hi
    raise RuntimeError("could not localise the integrand")


def _breaks_by_variation(x, gx, phase, lo, hi, step=8.0):
    """Points of x where the cumulative variation of log|f| and arg f passes multiples of step."""
    sel = (x >= lo) & (x <= hi)
    x, gx = x[sel], gx[sel]
    gx = np.where(np.isfinite(gx), gx, np.nan)
    dg = np.abs(np.diff(gx))
    dg = np.where(np.isnan(dg), step, dg)  # a zero of the integrand: force a break nearby
    if phase is not None:
        dg = dg + np.abs(np.diff(phase[sel]))
    V = np.concatenate([[0.0], np.cumsum(dg)])
    marks = np.floor(V / step)
    pos = np.nonzero(np.diff(marks) > 0)[0] + 1
    return list(x[pos])


QUAD_METHOD = "gauss-legendre"  # finite pieces are analytic; tails use tanh-sinh


def _quad_pieces(f, points, dom_lo_inf, dom_hi_inf):
    """Sum of mp.quad over consecutive points, plus tails to -inf / +inf if requested."""
    total = mp.mpf(0)
    err = mp.mpf(0)
    pts = [mp.mpf(p) for p in points]
    if dom_lo_inf:
        v, e = mp.quad(f, [mp.ninf, pts[0]], error=True)
        total += v
        err += e
    for a, b in zip(pts[:-1], pts[1:]):
        if b > a:
            v, e = mp.quad(f, [a, b], error=True, method=QUAD_METHOD)
            total += v
            err += e
    if dom_hi_inf:
        v, e = mp.quad(f, [pts[-1], mp.inf], error=True)
        total += v
        err += e
    return total, err


def _range_guess(noise, scale, delta, r_abs, dps):
    T = (dps + 10) * math.log(10)
    if noise == "gaussian":
        W = (math.sqrt(2 * T) + 30) * scale
    else:
        W = (T + 30) * scale
    R = (1 + 2 * r_abs) * delta + W
    return R, T


# --------------------------------------------------------------------------
# 1. log MGF
# --------------------------------------------------------------------------


def log_mgf_mpmath(s, noise, scale, q, sensitivity=1.0, relation="remove", dps=30,
                   return_error=False):
    """log M(s), M(s) = int P(o)^{1+s} Q(o)^{-s} do = E_{o~P}[exp(s L(o))].

    ``s`` real or complex (anything mpmath accepts).  Returns an mpmath mpf /
    mpc (principal branch of the log of the integral for complex s).  With
    ``return_error`` also returns mp.quad's summed absolute error estimate
    relative to |M|.  For complex s the integral can cancel (|M(s)| << M(Re s));
    the digits lost are read off the error estimate and the computation is
    repeated with that many more digits (up to 3 times).
    """
    _check(noise, scale, q, sensitivity, relation)
    extra = 0  # digits lost to cancellation (complex s), found from the error estimate
    for attempt in range(4):
        out, rel = _log_mgf_once(s, noise, scale, q, sensitivity, relation, dps, extra)
        if rel <= mp.mpf(10) ** (-dps) or attempt == 3:
            break
        extra += int(mp.ceil(mp.log10(rel))) + dps + 5
    if return_error:
        return out, rel
    return out


def _log_mgf_once(s, noise, scale, q, sensitivity, relation, dps, extra):
    with mp.workdps(dps + 10 + extra):
        s = mp.mpmathify(s)
        is_complex = isinstance(s, mp.mpc) and s.imag != 0
        sr = float(mp.re(s))
        si = float(mp.im(s))
        Pf, Qf = _components(relation, q, float(sensitivity))
        Pm, Qm, scale_m, lmu0 = _mp_setup(noise, scale, q, sensitivity, relation)

        def g(o):  # log |integrand|, float
            KP, _ = _K_f(noise, scale, Pf, o)
            KQ, _ = _K_f(noise, scale, Qf, o)
            return _logmu_f(noise, scale, o) + (1 + sr) * KP - sr * KQ

        def phase(o):
            KP, _ = _K_f(noise, scale, Pf, o)
            KQ, _ = _K_f(noise, scale, Qf, o)
            return si * (KP - KQ)

        R, T = _range_guess(noise, scale, float(sensitivity), abs(sr), dps + extra)
        lo, hi, x, gx = _significant_hull(g, -R, R, T)
        gmax = float(np.max(gx))
        breaks = {lo, hi}
        breaks.update(k for k in _kinks(noise, Pf, Qf) if lo < k < hi)
        breaks.update(_breaks_by_variation(x, gx, phase(x) if is_complex else None, lo, hi))
        pts = sorted(breaks)
        shift = mp.mpf(gmax)

        def f(o):
            KP = _K_mp(noise, scale_m, Pm, o)
            KQ = _K_mp(noise, scale_m, Qm, o)
            return mp.exp(_logmu_mp(noise, scale_m, o, lmu0) + (1 + s) * KP - s * KQ - shift)

        total, err = _quad_pieces(f, pts, True, True)
        return +(mp.log(total) + shift), err / abs(total)


# --------------------------------------------------------------------------
# 2. one-use delta by quadrature
# --------------------------------------------------------------------------


def _refine_root_mp(Lm, a, b):
    """Root of the monotone function Lm on [a, b] (sign change), by mp bisection/anderson."""
    a, b = mp.mpf(a), mp.mpf(b)
    fa, fb = Lm(a), Lm(b)
    if fa == 0:
        return a
    if fb == 0:
        return b
    try:
        r = mp.findroot(Lm, (a, b), solver="anderson")
        if a <= r <= b and abs(Lm(r)) < mp.mpf(10) ** (-mp.mp.dps + 8):
            return r
    except (ValueError, ZeroDivisionError):
        pass
    for _ in range(mp.mp.prec + 10):  # plain bisection
        m = (a + b) / 2
        fm = Lm(m)
        if fm == 0:
            return m
        if (fm > 0) == (fa > 0):
            a, fa = m, fm
        else:
            b = m
    return (a + b) / 2


def delta_one_use_mpmath(eps, noise, scale, q, sensitivity=1.0, relation="remove", dps=30,
                         return_error=False):
    """Exact delta(eps) = int (P - e^eps Q)_+ do of ONE use, by mp.quad.

    ``relation`` may also be "add_remove" (max of the two directions).
    Returns an mpf (and mp.quad's relative error estimate with return_error).
    """
    _check(noise, scale, q, sensitivity, relation, allow_add_remove=True)
    if relation == "add_remove":
        r1 = delta_one_use_mpmath(eps, noise, scale, q, sensitivity, "remove", dps, return_error)
        r2 = delta_one_use_mpmath(eps, noise, scale, q, sensitivity, "add", dps, return_error)
        if return_error:
            return (r1 if r1[0] >= r2[0] else r2)
        return max(r1, r2)
    with mp.workdps(dps + 10):
        epsm = mp.mpf(eps)
        epsf = float(eps)
        Pf, Qf = _components(relation, q, float(sensitivity))
        Pm, Qm, scale_m, lmu0 = _mp_setup(noise, scale, q, sensitivity, relation)

        def Lf(o):
            return _K_f(noise, scale, Pf, o)[0] - _K_f(noise, scale, Qf, o)[0]

        def Lm(o):
            return _K_mp(noise, scale_m, Pm, o) - _K_mp(noise, scale_m, Qm, o) - epsm

        def g(o):
            KP, _ = _K_f(noise, scale, Pf, o)
            L = KP - _K_f(noise, scale, Qf, o)[0]
            with np.errstate(all="ignore"):
                val = _logmu_f(noise, scale, o) + KP + np.log(-np.expm1(epsf - L))
            return np.where(L > epsf, val, -np.inf)

        R, T = _range_guess(noise, scale, float(sensitivity), 0.0, dps)
        # the region {L > eps} may start far out (Gaussian, large eps): widen until seen
        for _ in range(40):
            xs = np.linspace(-R, R, 20001)
            if np.any(Lf(xs) > epsf):
                break
            R *= 2
        else:
            return (mp.mpf(0), mp.mpf(0)) if return_error else mp.mpf(0)
        hull = _significant_hull(g, -R, R, T)
        if hull is None:
            return (mp.mpf(0), mp.mpf(0)) if return_error else mp.mpf(0)
        lo, hi, x, gx = hull
        gmax = float(np.max(gx))
        breaks = {lo, hi}
        breaks.update(k for k in _kinks(noise, Pf, Qf) if lo < k < hi)
        # roots of L = eps inside the hull (grid sign changes refined in mp)
        xr = np.linspace(lo, hi, 20001)
        d = Lf(xr) - epsf
        # float signs within rounding of 0 (e.g. eps equal to a flat Laplace loss level)
        # are decided in mp, so that rounding noise does not create spurious roots
        unsure = np.nonzero(np.abs(d) <= 1e-12 * (1 + abs(epsf)))[0]
        for i in unsure:
            d[i] = 1.0 if Lm(mp.mpf(xr[i])) > 0 else -1.0
        sc = np.nonzero((d[:-1] > 0) != (d[1:] > 0))[0]
        for i in sc:
            breaks.add(_refine_root_mp(Lm, xr[i], xr[i + 1]))
        breaks.update(_breaks_by_variation(x, gx, None, lo, hi))
        pts = sorted(mp.mpf(p) for p in breaks)
        shift = mp.mpf(gmax)

        def f(o):
            KP = _K_mp(noise, scale_m, Pm, o)
            L = KP - _K_mp(noise, scale_m, Qm, o)
            if L <= epsm:
                return mp.mpf(0)
            return mp.exp(_logmu_mp(noise, scale_m, o, lmu0) + KP - shift) * (-mp.expm1(epsm - L))

        total, err = _quad_pieces(f, pts, True, True)
        out = total * mp.exp(shift)
        if return_error:
            return +out, (err / total if total else err)
        return +out


# --------------------------------------------------------------------------
# 3. brute-force pessimistic / optimistic PLD bracket
# --------------------------------------------------------------------------


class _PLD:
    """Atoms w[i] at loss (j0 + i) h, plus mass at +infinity; err bounds the CDF sup error."""

    __slots__ = ("j0", "w", "inf", "err", "h")

    def __init__(self, j0, w, inf, err, h):
        self.j0, self.w, self.inf, self.err, self.h = int(j0), w, float(inf), float(err), h

    def delta(self, eps):
        """delta(eps) = sum_{l > eps} w_l (1 - e^{eps - l}) + inf."""
        eps = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.empty_like(eps)
        n = len(self.w)
        for t, e in enumerate(eps):
            i = int(math.floor(e / self.h)) - self.j0 + 1  # first index with (j0+i) h > e (up to rounding)
            i = max(i - 1, 0)
            if i >= n:
                out[t] = self.inf
                continue
            l = (self.j0 + np.arange(i, n)) * self.h
            c = -np.expm1(np.minimum(e - l, 0.0))
            out[t] = float(np.dot(self.w[i:], c)) + self.inf
        return out


def _cell_mass(noise, scale, comps, a, b):
    """P-mass of [a, b] (arrays, a <= b, may be +-inf), from the near tail side."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m = np.zeros(np.broadcast(a, b).shape)
    for w, c in comps:
        x, y = (a - c) / scale, (b - c) / scale
        if noise == "gaussian":
            right = x >= 0
            left = y <= 0
            mid = ~(right | left)
            v = np.empty_like(m)
            v[right] = ndtr(-x[right]) - ndtr(-y[right])
            v[left] = ndtr(y[left]) - ndtr(x[left])
            v[mid] = 1.0 - ndtr(-y[mid]) - ndtr(x[mid])
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                right = x >= 0
                left = y <= 0
                mid = ~(right | left)
                v = np.empty_like(m)
                # 0.5 e^{-x} (1 - e^{-(y-x)})
                xr, yr = x[right], y[right]
                v[right] = 0.5 * np.exp(-xr) * np.where(np.isinf(yr), 1.0, -np.expm1(-(yr - xr)))
                xl, yl = x[left], y[left]
                v[left] = 0.5 * np.exp(yl) * np.where(np.isinf(xl), 1.0, -np.expm1(xl - yl))
                v[mid] = 1.0 - 0.5 * np.exp(-y[mid]) - 0.5 * np.exp(x[mid])
        m = m + w * v
    return m


def _invert_monotone(Lfun, u, v, targets, increasing, scale):
    """o in [u, v] with L(o) = target, for sorted targets strictly inside (L(u), L(v))."""
    n_tab = 8193
    t = np.linspace(u, v, n_tab)
    Lt, _ = Lfun(t)
    sgn = 1.0 if increasing else -1.0
    Lt_s = np.maximum.accumulate(sgn * Lt)
    tg = sgn * targets
    idx = np.clip(np.searchsorted(Lt_s, tg), 1, n_tab - 1)
    lo, hi = t[idx - 1].copy(), t[idx].copy()
    L0, L1 = Lt_s[idx - 1], Lt_s[idx]
    with np.errstate(all="ignore"):
        frac = np.where(L1 > L0, (tg - L0) / (L1 - L0), 0.5)
    x = lo + np.clip(frac, 0.0, 1.0) * (hi - lo)
    active = np.arange(len(targets))
    for _ in range(200):
        if active.size == 0:
            break
        xa = x[active]
        La, dLa = Lfun(xa)
        fa = sgn * La - tg[active]
        dfa = sgn * dLa
        below = fa < 0
        lo[active] = np.where(below, xa, lo[active])
        hi[active] = np.where(below, hi[active], xa)
        with np.errstate(all="ignore"):
            step = fa / dfa
        xn = xa - step
        tol = 4 * _U * (np.abs(xa) + scale)
        converged = (fa == 0) | (np.isfinite(step) & (np.abs(step) <= tol))
        bad = ~converged & (~np.isfinite(xn) | (xn <= lo[active]) | (xn >= hi[active]))
        xn = np.where(bad, 0.5 * (lo[active] + hi[active]), xn)
        done = converged | (hi[active] - lo[active] <= tol)
        x[active] = np.where(fa == 0, xa, np.clip(xn, lo[active], hi[active]))
        active = active[~done]
    return x


def _ceil_idx(l, h):
    return math.ceil((l + 16 * _U * (abs(l) + 1)) / h)


def _floor_idx(l, h):
    return math.floor((l - 16 * _U * (abs(l) + 1)) / h)


def _one_use(noise, scale, q, sensitivity, relation, h, tail):
    """(pessimistic, optimistic) one-use PLDs on the loss grid h Z."""
    P, Q = _components(relation, q, float(sensitivity))
    if q == 0 or sensitivity == 0:
        return (_PLD(0, np.array([1.0]), 0.0, 0.0, h), _PLD(0, np.array([1.0]), 0.0, 0.0, h))

    def Lfun(o):
        KP, dP = _K_f(noise, scale, P, o)
        KQ, dQ = _K_f(noise, scale, Q, o)
        return KP - KQ, dP - dQ

    kinks = _kinks(noise, P, Q)
    edges = [-np.inf] + kinks + [np.inf]
    centres = [c for _, c in P]
    z = -float(ndtri(tail / 2))  # Phi(-z) = tail / 2 per side and component
    pes_idx, pes_m, opt_idx, opt_m = [], [], [], []
    pes_inf = 0.0
    n_mono = 0
    max_abs_o = 0.0
    for u, v in zip(edges[:-1], edges[1:]):
        if noise == "laplace" and (np.isinf(u) or np.isinf(v)):
            const = True  # all kappa are constant beyond the outer kinks
        elif noise == "laplace":
            Lu, Lv = Lfun(np.array([u, v]))[0]
            const = abs(Lv - Lu) <= 1e-14 * (1 + abs(Lu))
        else:
            const = False
        if const:
            # evaluate at the finite end(s) (and one step outside an infinite end)
            xs = [x for x in (u, v) if np.isfinite(x)]
            xs += [v - 1.0] if np.isinf(u) else []
            xs += [u + 1.0] if np.isinf(v) else []
            cs = Lfun(np.array(xs))[0]
            m = float(_cell_mass(noise, scale, P, np.array([u]), np.array([v]))[0])
            pes_idx.append(np.array([_ceil_idx(float(cs.max()), h)]))
            pes_m.append(np.array([m]))
            opt_idx.append(np.array([_floor_idx(float(cs.min()), h)]))
            opt_m.append(np.array([m]))
            continue
        n_mono += 1
        # truncate infinite ends of a monotone (Gaussian) piece
        uu = u if np.isfinite(u) else min(centres) - z * scale
        vv = v if np.isfinite(v) else max(centres) + z * scale
        max_abs_o = max(max_abs_o, abs(uu), abs(vv))
        Lu, Lv = (float(y) for y in Lfun(np.array([uu, vv]))[0])
        increasing = Lv > Lu
        lmin, lmax = min(Lu, Lv), max(Lu, Lv)
        jmin = math.floor(lmin / h) + 1
        jmax = math.ceil(lmax / h) - 1
        js = np.arange(jmin, jmax + 1) if jmax >= jmin else np.arange(0)
        # drop targets that are within rounding of the ends (keeps preimages strictly inside)
        tg = js * h
        keep = (tg > lmin) & (tg < lmax)
        js, tg = js[keep], tg[keep]
        if increasing:
            oj = _invert_monotone(Lfun, uu, vv, tg, True, scale)
            b_o = np.concatenate([[uu], oj, [vv]])
            b_hi = np.concatenate([[_ceil_idx(Lu, h)], js, [_ceil_idx(Lv, h)]])
            b_lo = np.concatenate([[_floor_idx(Lu, h)], js, [_floor_idx(Lv, h)]])
        else:
            oj = _invert_monotone(Lfun, uu, vv, tg[::-1], False, scale)
            b_o = np.concatenate([[uu], oj, [vv]])
            b_hi = np.concatenate([[_ceil_idx(Lu, h)], js[::-1], [_ceil_idx(Lv, h)]])
            b_lo = np.concatenate([[_floor_idx(Lu, h)], js[::-1], [_floor_idx(Lv, h)]])
        b_o = np.maximum.accumulate(b_o)
        masses = _cell_mass(noise, scale, P, b_o[:-1], b_o[1:])
        pes_idx.append(np.maximum(b_hi[:-1], b_hi[1:]))
        opt_idx.append(np.minimum(b_lo[:-1], b_lo[1:]))
        pes_m.append(masses)
        opt_m.append(masses)
        # truncated output tails
        for end, o_end, l_end in ((u, uu, Lu), (v, vv, Lv)):
            if np.isfinite(end):
                continue
            mt = float(_cell_mass(noise, scale, P, np.array([-np.inf if end < 0 else o_end]),
                                  np.array([o_end if end < 0 else np.inf]))[0])
            # losses beyond this end go up if (right end and increasing) or (left end and decreasing)
            goes_up = (end > 0) == increasing
            if goes_up:
                pes_inf += mt
                opt_idx.append(np.array([_floor_idx(l_end, h)]))
                opt_m.append(np.array([mt]))
            else:
                pes_idx.append(np.array([_ceil_idx(l_end, h)]))
                pes_m.append(np.array([mt]))
    # rounding allowance: CDF differences (telescoping per piece) + preimage rounding
    err = (max(n_mono, 1) + len(kinks)) * 128 * _U + 16 * _U * (max_abs_o / scale + 1)
    out = []
    for idx, ms, inf in ((pes_idx, pes_m, pes_inf), (opt_idx, opt_m, 0.0)):
        idx = np.concatenate(idx).astype(np.int64)
        ms = np.concatenate(ms)
        j0 = int(idx.min())
        w = np.bincount(idx - j0, weights=ms)
        out.append(_PLD(j0, w, inf, err, h))
    return tuple(out)


def _trim(p, tol, pessimistic):
    w = p.w
    nz = np.nonzero(w)[0]
    if nz.size == 0:
        return p
    w = w[nz[0]:nz[-1] + 1]
    j0 = p.j0 + int(nz[0])
    inf = p.inf
    if tol > 0 and w.size > 1:
        top = np.cumsum(w[::-1])
        ntop = int(np.searchsorted(top, tol, side="right"))  # atoms whose cumulative tail <= tol
        ntop = min(ntop, w.size - 1)
        if ntop:
            removed = float(top[ntop - 1])
            w = w[:w.size - ntop]
            if pessimistic:
                inf += removed
        bot = np.cumsum(w)
        nbot = int(np.searchsorted(bot, tol, side="right"))
        nbot = min(nbot, w.size - 1)
        if nbot:
            removed = float(bot[nbot - 1])
            w = w[nbot:].copy()
            j0 += nbot
            if pessimistic:
                w[0] += removed
    return _PLD(j0, w, inf, p.err, p.h)


def _convolve(a, b, pessimistic, tol):
    na, nb = a.w.size, b.w.size
    if min(na, nb) <= 64 or na * nb <= 4_000_000:
        w = np.convolve(a.w, b.w)
        ferr = 2 * min(na, nb) * _U * a.w.sum() * b.w.sum()
    else:
        N = scipy.fft.next_fast_len(na + nb - 1, real=True)
        fa = scipy.fft.rfft(a.w, N)
        fb = scipy.fft.rfft(b.w, N)
        w = scipy.fft.irfft(fa * fb, N)[:na + nb - 1]
        l1a, l1b = a.w.sum(), b.w.sum()
        l2a, l2b = np.sqrt(np.dot(a.w, a.w)), np.sqrt(np.dot(b.w, b.w))
        ferr = 3 * math.log2(N) * 5 * _U * min(l1a * l2b, l2a * l1b) * math.sqrt(N)
    neg = -float(w[w < 0].sum())
    w = np.maximum(w, 0.0)
    err = a.err * float(np.abs(b.w).sum()) + b.err + ferr + neg
    inf = a.inf + float(a.w.sum()) * b.inf if pessimistic else 0.0
    return _trim(_PLD(a.j0 + b.j0, w, inf, err, a.h), tol, pessimistic)


def _compose(p, k, pessimistic, tol):
    result = None
    base = _trim(p, tol, pessimistic) if k > 1 else p
    while k:
        if k & 1:
            result = base if result is None else _convolve(result, base, pessimistic, tol)
        k >>= 1
        if k:
            base = _convolve(base, base, pessimistic, tol)
    return result


def composed_plds_bruteforce(k, noise, scale, q, sensitivity=1.0, relation="remove", grid=1e-5,
                             tail=1e-30, compose_tail=1e-14):
    """[(pessimistic, optimistic)] k-fold PLDs, one pair per direction (two for add_remove)."""
    _check(noise, scale, q, sensitivity, relation, allow_add_remove=True)
    if int(k) != k or k < 1:
        raise ValueError("k must be a positive integer")
    rels = ("remove", "add") if relation == "add_remove" else (relation,)
    out = []
    for rel in rels:
        pes, opt = _one_use(noise, scale, q, sensitivity, rel, grid, tail)
        out.append((_compose(pes, int(k), True, compose_tail),
                    _compose(opt, int(k), False, compose_tail)))
    return out


def _bracket_from(plds, eps):
    lower = None
    upper = None
    for pes, opt in plds:
        up = pes.delta(eps) * (1 + 1e-12) + 2 * pes.err
        lo = opt.delta(eps) * (1 - 1e-12) - 2 * opt.err
        up = np.minimum(up, 1.0)
        lo = np.maximum(lo, 0.0)
        lower = lo if lower is None else np.maximum(lower, lo)
        upper = up if upper is None else np.maximum(upper, up)
    return lower, upper


def delta_bracket_bruteforce(eps, k, noise, scale, q, sensitivity=1.0, relation="remove",
                             grid=1e-5, tail=1e-30, compose_tail=1e-14):
    """Certified (lower, upper) arrays with lower <= delta_k(eps) <= upper.

    ``relation`` in {"remove", "add", "substitution", "add_remove"} (the last is
    the max over remove and add).  ``grid`` is the loss spacing h; the bracket
    width is about k h |d delta / d eps| plus the (tiny) rounding allowance.
    """
    plds = composed_plds_bruteforce(k, noise, scale, q, sensitivity, relation, grid, tail,
                                    compose_tail)
    return _bracket_from(plds, eps)


def _eps_for(delta_fn, target, lo=-50.0, hi=50.0, iters=200):
    """Smallest eps with delta_fn(eps) <= target for a non-increasing delta_fn (bisection)."""
    if delta_fn(lo) <= target:
        return lo
    if delta_fn(hi) > target:
        return math.inf
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if delta_fn(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 4 * _U * max(1.0, abs(hi)):
            break
    return hi


def _eps_for_plds(plds, target, side):
    """Smallest eps with the lower (side=0) / upper (side=1) bracket <= target.

    First a bisection over the loss grid n h (full evaluations), then, inside the
    cell ((n-1) h, n h) where the set {l > eps} is fixed, a bisection on
    delta = S0 - e^eps S1 (+ the allowances of _bracket_from) with the two sums
    taken once; the cancellation in S0 - e^eps S1 is at most 4 u S0, added to
    the allowance.
    """
    full = lambda e: float(_bracket_from(plds, e)[side][0])  # noqa: E731
    h = plds[0][0].h
    n_lo = min(p.j0 for pair in plds for p in pair) - 1
    n_hi = max(p.j0 + p.w.size for pair in plds for p in pair) + 1
    if full(n_lo * h) <= target:
        return _eps_for(full, target, lo=-50.0, hi=n_lo * h)
    if full(n_hi * h) > target:
        return math.inf
    while n_hi - n_lo > 1:  # full(n_lo h) > target >= full(n_hi h)
        mid = (n_lo + n_hi) // 2
        if full(mid * h) <= target:
            n_hi = mid
        else:
            n_lo = mid
    n = n_hi
    parts = []
    for pes, opt in plds:
        p = pes if side == 1 else opt
        i = max(n - p.j0, 0)
        w = p.w[i:]
        l = (p.j0 + np.arange(i, p.w.size)) * h
        s0 = float(w.sum())
        s1 = float(np.dot(w, np.exp(-l))) if w.size else 0.0
        parts.append((s0, s1, p.inf, p.err))

    def cell(e):
        vals = []
        for s0, s1, inf, err in parts:
            d = max(s0 - math.exp(e) * s1, 0.0)
            if side == 1:
                vals.append(min((d + 4 * _U * s0) * (1 + 1e-12) + inf + 2 * err, 1.0))
            else:
                vals.append(max((d - 4 * _U * s0) * (1 - 1e-12) - 2 * err, 0.0))
        return max(vals)

    return _eps_for(cell, target, lo=(n - 1) * h, hi=n * h)


def epsilon_bracket_bruteforce(delta, k, noise, scale, q, sensitivity=1.0, relation="remove",
                               grid=1e-5, tail=1e-30, compose_tail=1e-14):
    """Certified (eps_lower, eps_upper) for the smallest eps with delta_k(eps) <= delta."""
    plds = composed_plds_bruteforce(k, noise, scale, q, sensitivity, relation, grid, tail,
                                    compose_tail)
    return _eps_for_plds(plds, delta, 0), _eps_for_plds(plds, delta, 1)
