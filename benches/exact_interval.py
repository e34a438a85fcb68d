"""The exact, distribution-free interval for a median of paired rounds,
shared by the GPU benches' summaries (benches/gpu_overhead_summary.py,
benches/gpu_lazy_parts.py, benches/gpu_steady_toggles.py): a verdict rests
on it, so it is one function.
"""

import math
import statistics


def median_interval(values, level=0.90):
    """The order statistics (k, n+1-k) with the largest k whose coverage,
    1 - 2 P(Binomial(n, 1/2) < k), is still at least `level`; with that
    coverage. None below 5 rounds (no such interval reaches 90%)."""
    v, n = sorted(values), len(values)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if coverage < level:
            break
        best = (v[k - 1], v[n - k], coverage)
    return best


def sign_test_p(slower, n):
    """Two-sided exact sign-test p-value of `slower` rounds of `n` (ties
    dropped by the caller): how often a coin would be at least as lopsided."""
    if n == 0:
        return float("nan")
    k = max(slower, n - slower)
    tail = sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(differences):
    """What a summary says of paired differences (one a round or pair):
    (median, interval low, interval high, coverage, slower, moved, p), the
    interval NaN below 5 and ties left out of the sign test."""
    found = median_interval(differences)
    lo, hi, coverage = found if found else (float("nan"),) * 3
    moved = [d for d in differences if d != 0]
    slower = sum(d > 0 for d in moved)
    return (statistics.median(differences), lo, hi, coverage, slower, len(moved),
            sign_test_p(slower, len(moved)))


def paired_text(differences, unit, digits):
    """The words a summary line gives paired differences in `unit` (`ms`,
    `us`), `digits` after the point: added_<unit>, its interval, the
    coverage, the sign test."""
    median, lo, hi, coverage, slower, moved, p = paired(differences)
    return (f"added_{unit}={median:.{digits}f} added_{unit}_90={lo:.{digits}f}..{hi:.{digits}f} "
            f"coverage={coverage:.3f} slower={slower}/{moved} p={p:.4f}")
