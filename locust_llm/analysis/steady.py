"""Is a step's steady window really steady? Linear drift of a metric over time, with a t-based CI that respects the
correlation between neighbouring points.

A throughput measured second by second, or the latency of consecutive requests, is not a series of independent
values: a server slow this second tends to be slow the next. An interval that ignores it calls stationary noise a
drift (on AR(1) noise with lag-1 correlation 0.8 and 12% spread, 30 s windows: half of them). So the slope's
variance is inflated the way the speed-up intervals inflate a mean's (``rates.lag1`` of the fit's residuals,
``rates.ar1_inflation``), and its t quantile has the effective number of points minus 2 degrees of freedom.

Steadiness is an equivalence test: a window is ``steady`` when its drift (the fitted change across the window, as a
fraction of the mean) is shown to lie inside +-``tolerance`` (10%) by two one-sided tests at ``alpha`` (5%), i.e. when
its ``1 - 2 alpha`` (90%) interval lies inside the margin (Schuirmann's TOST); ``unsteady`` when it is not and its
``1 - alpha`` (95%) interval excludes no drift (a drift is seen, and it is not shown to be small); ``too noisy``
otherwise: the window cannot tell a steady server from a drifting one. A noisy window is never called steady because
its interval is wide (absence of evidence is not evidence of absence).

Pure functions (numpy only; the t quantile is :func:`stats.t_quantile`, no scipy). No Locust imports.
"""

from __future__ import annotations

import math

import numpy as np

from .cycles import MIN_BATCHES, Batches
from .rates import ar1_inflation, lag1
from .stats import t_quantile

__all__ = ["DRIFT_TOLERANCE", "STEADY", "TOO_NOISY", "UNSTEADY", "batch_drift", "drift"]


DRIFT_TOLERANCE = 0.10
STEADY, UNSTEADY, TOO_NOISY = "steady", "unsteady", "too noisy"


def drift(times, values, alpha: float = 0.05, tolerance: float = DRIFT_TOLERANCE, autocorrelated: bool = True) -> dict:
    """Ordinary-least-squares drift of ``values`` against ``times`` (seconds) over a window.

    Returns ``{"slope", "ci95", "relative_slope_per_min", "steady", "status", "n", "window_s", "mean",
    "drift_fraction", "drift_ci95", "drift_ci90", "rho"}``:

    * ``slope``: OLS slope ``b = Sxy / Sxx`` in value units per second;
    * ``ci95``: ``[b - t * se, b + t * se]`` with ``se = sqrt(SSR / (n - 2) / Sxx * inflation)`` and ``t`` the
      ``1 - alpha/2`` quantile of Student's t with ``max(n / inflation - 2, 1)`` degrees of freedom
      (:func:`stats.t_quantile`, exact to < 1e-9). ``inflation = (1 + rho) / (1 - rho)`` with ``rho`` the
      bias-corrected lag-1 autocorrelation of the residuals in time order (``rho``; 0 and no inflation when
      ``autocorrelated`` is False: points known to be independent, e.g. a soak's windows). The key is ``ci95``
      whatever ``alpha`` is;
    * ``relative_slope_per_min``: ``60 * b / mean(values)`` (fraction of the mean per minute; None if the mean
      is 0);
    * ``drift_fraction``: ``|b| * window_s / |mean|``, the fitted change across the whole window relative to the
      mean, where ``window_s = max(times) - min(times)``;
    * ``drift_ci95``: ``ci95`` as the fitted change across the window relative to the mean (signed);
      ``drift_ci90``: the same at ``1 - 2 alpha`` (the equivalence test's interval);
    * ``status``: ``steady`` when ``drift_ci90`` lies inside ``(-tolerance, tolerance)`` (default 10%),
      else ``unsteady`` when ``drift_ci95`` excludes 0, else ``too noisy`` (module docstring); ``steady`` is
      True / False / None for the three.

    Only pairs where both time and value are finite are used. With fewer than 3 of them, or all at the same
    time, there is no residual variance to judge by: ``slope`` / ``ci95`` are None where undefined and
    ``steady`` is None (unknown, not "fine").
    """
    t = np.asarray(times, dtype=float).ravel()
    y = np.asarray(values, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"{t.size} times but {y.size} values")
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    n = int(t.size)
    window_s = float(t.max() - t.min()) if n else 0.0
    out: dict[str, object] = {
        "slope": None,
        "ci95": None,
        "relative_slope_per_min": None,
        "steady": None,
        "n": n,
        "window_s": window_s,
        "mean": float(y.mean()) if n else None,
        "drift_fraction": None,
        "drift_ci95": None,
        "drift_ci90": None,
        "status": None,
        "rho": None,
    }
    if n < 2:
        return out
    tc = t - t.mean()
    sxx = float(np.dot(tc, tc))
    if sxx <= 0.0:
        return out
    mean = float(y.mean())
    slope = float(np.dot(tc, y - mean) / sxx)
    out["slope"] = slope
    if mean != 0.0:
        out["relative_slope_per_min"] = 60.0 * slope / mean
        out["drift_fraction"] = abs(slope) * window_s / abs(mean)
    if n < 3:
        return out
    intercept = mean - slope * float(t.mean())
    residuals = y - (intercept + slope * t)
    rho = lag1([residuals[np.argsort(t, kind="stable")]], fitted=2) if autocorrelated else 0.0
    inflation = ar1_inflation(rho)
    out["rho"] = rho
    se = math.sqrt(float(np.dot(residuals, residuals)) / (n - 2) / sxx * inflation)
    df = max(n / inflation - 2.0, 1.0)
    half = t_quantile(1.0 - alpha / 2.0, df) * se
    out["ci95"] = [slope - half, slope + half]
    if mean == 0.0:
        return out
    lo_f, hi_f = _relative(slope, half, window_s, mean)
    out["drift_ci95"] = [lo_f, hi_f]
    lo_e, hi_e = _relative(slope, t_quantile(1.0 - alpha, df) * se, window_s, mean)
    out["drift_ci90"] = [lo_e, hi_e]
    if -tolerance < lo_e and hi_e < tolerance:
        out["status"], out["steady"] = STEADY, True
    elif lo_f > 0.0 or hi_f < 0.0:
        out["status"], out["steady"] = UNSTEADY, False
    else:
        out["status"] = TOO_NOISY
    return out


def _relative(slope: float, half: float, window_s: float, mean: float) -> tuple[float, float]:
    """``slope +- half`` as the signed change across the window, relative to the mean."""
    lo, hi = sorted(((slope - half) * window_s / mean, (slope + half) * window_s / mean))
    return lo, hi


def batch_drift(batches: Batches, start: float, end: float) -> dict | None:
    """Drift of a closed-loop step's throughput batch by batch (request-cycle batches of several cycles each, taken
    as independent: a lag-1 correlation estimated from 5-10 points would inflate the interval at random; calibration
    in docs/verdicts-and-gates.md). None with fewer than ``MIN_BATCHES`` batches: too short to judge (1-second bins
    of one or two cycles would measure where a cycle falls, and call a deterministic server too noisy)."""
    k = batches.tokens.size
    if k < MIN_BATCHES:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = batches.tokens / batches.seconds
    times = start + (end - start) * (np.arange(k) + 0.5) / k
    return drift(times, rates, autocorrelated=False)
