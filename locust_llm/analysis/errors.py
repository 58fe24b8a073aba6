"""Failed requests grouped by variant and error class, with one sample message each. Pure."""

from __future__ import annotations

import pandas as pd

__all__ = ["MESSAGE_MAX", "error_samples"]

MESSAGE_MAX = 400


def clip(value, limit: int) -> str | None:
    if value is None:
        return None
    value = str(value)
    return value if len(value) <= limit else value[:limit] + f"\u2026 (+{len(value) - limit} chars)"


def error_samples(frame: pd.DataFrame) -> list[dict]:
    """``[{variant, error_class, count, steady, levels, http_status, message}]`` over every phase."""
    if not len(frame) or "error_class" not in frame:
        return []
    failed = frame[frame["error_class"].notna()]
    out = []
    for (variant, error_class), group in failed.groupby(["variant", "error_class"], sort=False):
        messages = group["error_message"].dropna()
        status = group["http_status"].dropna()
        out.append(
            {
                "variant": variant,
                "error_class": error_class,
                "count": len(group),
                "steady": int((group["phase"] == "steady").sum()),
                "levels": sorted(float(x) for x in group["level"].dropna().unique()),
                "http_status": [int(x) for x in sorted(status.unique())[:5]],
                "message": clip(messages.iloc[0], MESSAGE_MAX) if len(messages) else None,
            }
        )
    return out
