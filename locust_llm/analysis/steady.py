"""Is a step's steady window really steady? Linear drift of a metric over time, with a t-based CI that respects the
correlation between neighbouring points.

A throughput measured second by second, or the latency of consecutive requests, is not a series of independent
values: a server slow this second tends to be slow the next. An interval that ignores it calls stationary noise a
drift (on AR(1) noise with lag-1 correlation 0.8 and 12% spread, 30 s windows: half of them). So the slope's
variance is inflated the way the speed-up intervals inflate a mean's (``rates.lag1`` of the fit's residuals,
``rates.ar1_inflation``), and its t quantile has the effective number of points minus 2 degrees of freedom.

Pure functions (numpy only; the t quantile is :func:`stats.t_quantile`, no scipy). No Locust imports.
"""

from __future__ import annotations

import math

import numpy as np

from .rates import ar1_inflation, lag1
from .stats import t_quantile

__all__ = ["drift"]


DRIFT_TOLERANCE = 0.05


def drift(times, values, alpha: float = 0.05, tolerance: float = DRIFT_TOLERANCE, autocorrelated: bool = True) -> dict:
    """Ordinary-least-squares drift of ``values`` against ``times`` (seconds) over a window.

    Returns ``{"slope", "ci95", "relative_slope_per_min", "steady", "n", "window_s", "mean", "drift_fraction",
    "rho"}``:

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
    * ``steady``: True when the CI contains 0 (no detectable trend) **or** ``drift_fraction < tolerance``
      (default 5%: the trend exists but moves the metric by less than 5% of its mean over the window). The
      second arm keeps a long, well-measured step with a tiny but statistically significant slope steady; the
      first keeps short noisy steps from being rejected on noise alone. Otherwise False.

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
    drift_fraction: float | None = None
    out: dict[str, object] = {
        "slope": None,
        "ci95": None,
        "relative_slope_per_min": None,
        "steady": None,
        "n": n,
        "window_s": window_s,
        "mean": float(y.mean()) if n else None,
        "drift_fraction": None,
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
        drift_fraction = out["drift_fraction"] = abs(slope) * window_s / abs(mean)
    if n < 3:
        return out
    intercept = mean - slope * float(t.mean())
    residuals = y - (intercept + slope * t)
    rho = lag1([residuals[np.argsort(t, kind="stable")]], fitted=2) if autocorrelated else 0.0
    inflation = ar1_inflation(rho)
    out["rho"] = rho
    se = math.sqrt(float(np.dot(residuals, residuals)) / (n - 2) / sxx * inflation)
    half = t_quantile(1.0 - alpha / 2.0, max(n / inflation - 2.0, 1.0)) * se
    lo, hi = slope - half, slope + half
    out["ci95"] = [lo, hi]
    small = drift_fraction is not None and drift_fraction < tolerance
    out["steady"] = bool(lo <= 0.0 <= hi or small)
    return out
