"""Is a step's steady window really steady? Linear drift of a metric over time, with a t-based CI.

Pure functions (numpy only; the t quantile is :func:`stats.t_quantile`, no scipy). No Locust imports.
"""

from __future__ import annotations

import math

import numpy as np

from .stats import t_quantile

__all__ = ["drift"]


DRIFT_TOLERANCE = 0.05


def drift(times, values, alpha: float = 0.05, tolerance: float = DRIFT_TOLERANCE) -> dict:
    """Ordinary-least-squares drift of ``values`` against ``times`` (seconds) over a window.

    Returns ``{"slope", "ci95", "relative_slope_per_min", "steady", "n", "window_s", "mean", "drift_fraction"}``:

    * ``slope``: OLS slope ``b = Sxy / Sxx`` in value units per second;
    * ``ci95``: ``[b - t * se, b + t * se]`` with ``se = sqrt(SSR / (n - 2) / Sxx)`` and ``t`` the
      ``1 - alpha/2`` quantile of Student's t with ``n - 2`` degrees of freedom (:func:`stats.t_quantile`,
      exact to < 1e-9). The key is ``ci95`` whatever ``alpha`` is;
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
    out = {
        "slope": None,
        "ci95": None,
        "relative_slope_per_min": None,
        "steady": None,
        "n": n,
        "window_s": float(t.max() - t.min()) if n else 0.0,
        "mean": float(y.mean()) if n else None,
        "drift_fraction": None,
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
        out["drift_fraction"] = abs(slope) * out["window_s"] / abs(mean)
    if n < 3:
        return out
    intercept = mean - slope * float(t.mean())
    residuals = y - (intercept + slope * t)
    se = math.sqrt(float(np.dot(residuals, residuals)) / (n - 2) / sxx)
    half = t_quantile(1.0 - alpha / 2.0, n - 2) * se
    lo, hi = slope - half, slope + half
    out["ci95"] = [lo, hi]
    small = out["drift_fraction"] is not None and out["drift_fraction"] < tolerance
    out["steady"] = bool(lo <= 0.0 <= hi or small)
    return out
