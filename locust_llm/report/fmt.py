"""Number formatting shared by the report, its charts and its exports."""

from __future__ import annotations

import math


def ok(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(v, digits: int = 3) -> str | None:
    """Three significant digits, thousands separated; None when not measured."""
    if not ok(v):
        return None
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    if a < 0.001:
        return f"{v:.2e}"
    text = f"{v:.{digits}g}"
    return f"{float(text):g}" if "e" in text else text
