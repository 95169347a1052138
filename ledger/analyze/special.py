"""The three special functions the verdicts need: Student's t distribution and its inverse
(intervals, Welch's test) and the Kolmogorov distribution's tail (change points).

scipy has them, but `import scipy.special` costs about 0.15 s on a 2-core machine (its
array-API layer imports numpy's f2py, testing and masked-array modules), a tenth of a
whole `ledger compare`. These are scalar, in plain `math`, and agree with scipy to about
1e-13 relative (tests/test_special.py checks them against scipy over grids).
"""

from __future__ import annotations

import functools
import math

_TINY = 1e-300  # keeps the continued fraction's denominators off zero (modified Lentz)
_EPS = 1e-16
_MAX_TERMS = 100_000  # the fraction needs about √(df) terms; this is far past any df used
_LOG_MAX = math.log(1e300)
_LGAMMA_HALF = 0.5 * math.log(math.pi)


def stdtr(df: float, t: float) -> float:
    """P(T ≤ t) for Student's t with `df` degrees of freedom (scipy.special.stdtr)."""
    if math.isnan(df) or math.isnan(t) or df <= 0:
        return math.nan
    if math.isinf(t):
        return 0.0 if t < 0 else 1.0
    if t == 0.0:
        return 0.5
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2.0))
    tail = 0.5 * _t_tail(df, abs(t))  # P(T ≤ −|t|)
    return tail if t < 0 else 1.0 - tail


@functools.lru_cache(maxsize=1024)  # intervals ask for the same few (batches − 1, 0.975)
def stdtrit(df: float, p: float) -> float:
    """The t with stdtr(df, t) = p (scipy.special.stdtrit)."""
    if math.isnan(df) or math.isnan(p) or df <= 0 or not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    if p == 0.5:
        return 0.0
    # The lower tail is solved for; for p > 1/2, 1 − p is exact (Sterbenz), so nothing
    # is lost by the symmetry.
    q = min(p, 1.0 - p)
    t = -_lower_quantile(df, q)  # ≥ 0
    return -t if p < 0.5 else t


def kolmogorov(x: float) -> float:
    """P(K > x) for the Kolmogorov distribution (scipy.special.kolmogorov)."""
    if math.isnan(x):
        return math.nan
    if x <= 0.0:
        return 1.0
    if x < 0.82:  # the alternating series converges slowly here: 1 − the theta series
        w = math.pi**2 / (8.0 * x * x)
        total, k = 0.0, 1
        while True:
            term = math.exp(-((2 * k - 1) ** 2) * w)
            total += term
            if term <= _EPS * total or k > 100:
                break
            k += 1
        return max(0.0, 1.0 - math.sqrt(2.0 * math.pi) / x * total)
    total, k, sign = 0.0, 1, 1.0
    while True:
        term = math.exp(-2.0 * k * k * x * x)
        total += sign * term
        if term <= _EPS * abs(total) or k > 100:
            break
        k, sign = k + 1, -sign
    return min(1.0, max(0.0, 2.0 * total))


def _t_tail(df: float, t: float) -> float:
    """P(|T| ≥ t) for t > 0: the regularized incomplete beta I_x(df/2, 1/2) at
    x = df / (df + t²), with log x and log(1 − x) taken from t/√df, not from x (x near
    0 or 1 would lose them)."""
    a, b = df / 2.0, 0.5
    ratio = t / math.sqrt(df)
    if ratio < 1e150:  # log x = −log(1 + t²/df): a × log x must not lose a's digits
        log_x = -math.log1p(ratio * ratio)
        log_1mx = 2.0 * math.log(ratio) + log_x
    else:
        log_x = -2.0 * math.log(ratio)
        log_1mx = -math.log1p(1.0 / (ratio * ratio))
    x = math.exp(log_x)
    if x < (a + 1.0) / (a + b + 2.0):
        return _front(a, b, log_x, log_1mx) * _beta_fraction(a, b, x) / a
    # I_x(a, b) = 1 − I_(1−x)(b, a): the fraction converges fast on that side
    y = math.exp(log_1mx)
    return 1.0 - _front(a, b, log_x, log_1mx) * _beta_fraction(b, a, y) / b


def _front(a: float, b: float, log_x: float, log_1mx: float) -> float:
    """x^a (1 − x)^b / B(a, b), b = 1/2."""
    return math.exp(a * log_x + b * log_1mx - _log_beta_half(a))


def _log_beta_half(a: float) -> float:
    """log B(a, 1/2). lgamma(a) − lgamma(a + 1/2) loses digits to cancellation as a
    grows (1e-11 at a = 5000); from a = 50 on, the difference of Stirling's series,
    whose large terms are one log1p, keeps them."""
    if a < 50.0:
        return math.lgamma(a) + _LGAMMA_HALF - math.lgamma(a + 0.5)
    ratio = 0.5 * math.log(a) + (a * math.log1p(0.5 / a) - 0.5) + _stirling(a + 0.5) - _stirling(a)
    return _LGAMMA_HALF - ratio  # ratio = log Γ(a + 1/2) / Γ(a)


def _stirling(z: float) -> float:
    """log Γ(z) − ((z − 1/2) log z − z + log(2π)/2), to 1e-19 for z ≥ 50."""
    w = 1.0 / (z * z)
    return (1.0 / 12.0 - w * (1.0 / 360.0 - w * (1.0 / 1260.0 - w / 1680.0))) / z


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), which
    converges for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def _t_density(df: float, t: float) -> float:
    log_norm = -_log_beta_half(df / 2.0) - 0.5 * math.log(df)
    return math.exp(log_norm - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def _lower_quantile(df: float, q: float) -> float:
    """The t < 0 with P(T ≤ t) = q, 0 < q < 1/2."""
    if df == 1.0:  # Cauchy: tan(π(q − 1/2)), written so that a tiny q keeps its digits
        return -1.0 / math.tan(math.pi * q)
    if df == 2.0:
        return (2.0 * q - 1.0) / math.sqrt(2.0 * q * (1.0 - q))
    if math.isinf(df):
        return _normal_quantile(q)
    # Newton's steps on log P(T ≤ −e^u) = log q in u = log|t|: nearly a straight line in
    # the tails, where P falls as |t|^−df (steps in t crawl there). They are kept inside
    # a bracket [low, high] that holds the root, bisecting where a step would leave it.
    log_q = math.log(q)
    u = math.log(-_start(df, q))
    low, high = u, u  # log P at low ≥ log q ≥ log P at high
    while _log_lower(df, low) < log_q:
        low -= 1.0
    while _log_lower(df, high) > log_q:
        high += 1.0
        if high > _LOG_MAX:  # beyond the largest float
            return -math.inf
    for _ in range(200):
        log_p = _log_lower(df, u)
        if log_p == log_q:
            break
        if log_p > log_q:
            low = u
        else:
            high = u
        t = math.exp(u)
        p = math.exp(log_p)
        slope = -_t_density(df, t) * t / p if p > 0.0 else 0.0  # d log P / du
        nxt = u - (log_p - log_q) / slope if slope < 0.0 else 0.5 * (low + high)
        if not low <= nxt <= high:
            nxt = 0.5 * (low + high)
        done = abs(nxt - u) <= 2.0 * _EPS * max(1.0, abs(u))
        u = nxt
        if done:
            break
    return -math.exp(u)


def _log_lower(df: float, u: float) -> float:
    """log P(T ≤ −e^u); −inf where it underflows."""
    tail = 0.5 * _t_tail(df, math.exp(u))
    return math.log(tail) if tail > 0.0 else -math.inf


def _start(df: float, q: float) -> float:
    """A first guess: the Cornish-Fisher expansion about the normal quantile, which is
    close for df ≥ 3 and a fair start below."""
    z = _normal_quantile(q)
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    t = z + g1 / df + g2 / df**2 + g3 / df**3
    return t if t < 0 else z


def _normal_quantile(q: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)
