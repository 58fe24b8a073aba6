"""Every number, interval and level as text: one module for the report, its exports, the console and the
analysis's sentences, so the same figure always reads the same. Pure; no imports from the package.

A figure that was not measured is ``None`` here; callers that need text put ``NOT_MEASURED`` in its place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TypeGuard

__all__ = [
    "NOT_MEASURED",
    "ci_text",
    "is_number",
    "lvl",
    "md",
    "ms",
    "num",
    "pct",
    "pct_ci",
    "points",
    "points_ci",
    "shown",
    "speedup",
    "text",
    "times",
]

NOT_MEASURED = "n/m"
DASH = "\u2013"


def is_number(v: object) -> TypeGuard[float]:
    """A finite number (booleans are not numbers here); to a type checker, a float after the check."""
    return v is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(v, digits: int = 3) -> str | None:
    """Three significant digits, thousands separated; None when not measured."""
    if not is_number(v):
        return None
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    if a < 0.001:
        return f"{v:.2e}"
    out = f"{v:.{digits}g}"
    return f"{float(out):g}" if "e" in out else out


def text(v) -> str:
    """``num`` for plain text (Markdown, console): ``n/m`` when not measured."""
    return num(v) or NOT_MEASURED


def pct(v, digits: int = 1) -> str | None:
    return f"{100 * v:.{digits}f}%" if is_number(v) else None


def pct_ci(ci) -> str | None:
    """A rate's interval in percent: ``50.5–89.8%``; None when the interval is missing."""
    interval = ci_text(ci, lambda v: f"{100 * v:.1f}")
    return interval + "%" if interval else None


def points(v) -> str | None:
    """A difference of two rates in percentage points, signed: ``-12.5``; None when not measured."""
    return f"{100 * v:+.1f}" if is_number(v) else None


def points_ci(ci) -> str | None:
    """A difference's interval in percentage points: ``-16.4 to +16.4``; None when the interval is missing."""
    if not ci or len(ci) != 2 or not is_number(ci[0]) or not is_number(ci[1]):
        return None
    return f"{points(ci[0])} to {points(ci[1])}"


def times(v) -> str | None:
    """A speed-up or ratio in a table cell: two decimals, ``1.84x``."""
    return f"{v:.2f}x" if is_number(v) else None


def speedup(v, suffix: str = "x") -> str:
    """A speed-up in a sentence: two decimals without trailing zeros, at least one (1.8x, 1.25x, 2.0x)."""
    if not is_number(v):
        return "n/a"
    out = f"{v:.2f}".rstrip("0")
    return (out + "0" if out.endswith(".") else out) + suffix


def ms(v) -> str:
    return f"{v:.1f}ms" if is_number(v) else "-"


def lvl(v) -> str:
    """A load level: ``1``, ``2.5``."""
    return f"{float(v):g}" if is_number(v) else str(v)


def ci_text(ci, fmt: Callable = num) -> str | None:
    """``lo–hi`` with an en dash; None when the interval is missing."""
    if not ci or len(ci) != 2 or not is_number(ci[0]) or not is_number(ci[1]):
        return None
    return f"{fmt(ci[0])}{DASH}{fmt(ci[1])}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#!])")


# A server's string is printed at most this long (characters, before escaping); the rest is counted, not shown.
SHOWN_MAX = 200
# What a terminal or a log reader would act on instead of showing: C0 and C1 controls, DEL, the Unicode line and
# paragraph separators, and the bidirectional overrides (text that reads in another order than it is stored).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def shown(value, limit: int = SHOWN_MAX) -> str:
    """A string a server sent (a model id, ``owned_by``, an error body or event, a metric name), as the console, a
    log line or summary.md prints it: control characters escaped (``\\x1b``, ``\\n``), so that it cannot end a
    line, move the cursor or retitle a terminal; cut to ``limit`` characters, the cut said."""
    value = "" if value is None else str(value)
    if len(value) > limit:
        value = f"{value[:limit]}... ({len(value):,} characters)"
    return _CONTROL.sub(_escaped, value)


def md(value) -> str:
    """Markdown-safe inline text: no tags, links, emphasis or table breaks from untrusted strings (whitespace runs
    made one space, other control characters escaped as ``shown`` does)."""
    value = "" if value is None else str(value)
    value = _CONTROL.sub(_escaped, " ".join(value.split()))
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", value)
