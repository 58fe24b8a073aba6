"""Plain values in and out of the analysis: tolerant number parsing, JSON without NaN or numpy types."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["json_safe", "to_float"]


def to_float(value) -> float:
    """A float, or NaN when the value is missing or not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def json_safe(value):
    """numpy scalars to Python, non-finite floats to None (JSON has no NaN), mapping keys to str."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value
