"""Prometheus text exposition (format 0.0.4, what vLLM, SGLang, llama.cpp and DCGM exporter serve) -> samples.

Pure; uses ``prometheus_client``'s own parser. A page that is not Prometheus text (an HTML error page, a
truncated body, binary noise) or that holds no sample at all raises :class:`MetricsParseError`, so the
poller can record a gap instead of a zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MetricsParseError", "Sample", "parse_text"]


class MetricsParseError(ValueError):
    """The text is not a Prometheus exposition page (or holds no sample)."""


@dataclass(frozen=True)
class Sample:
    name: str  # the exposed sample name, e.g. ``vllm:spec_decode_num_drafts_total``
    value: float
    labels: dict = field(default_factory=dict, hash=False, compare=True)
    timestamp: float | None = None  # seconds, when the page carries one (rare)


def _sample_name(line: str) -> str:
    end = len(line)
    for stop in ("{", " ", "\t"):
        i = line.find(stop)
        if 0 <= i < end:
            end = i
    return line[:end]


def prefilter(text: str, wanted: Callable[[str], bool]) -> str:
    """Keep only the sample lines whose name ``wanted`` accepts (and drop comments).

    A vLLM page with every histogram bucket is hundreds of kilobytes; parsing only the few dozen lines
    the maps need keeps a poll cheap for the event loop. Dropping ``# TYPE`` lines is harmless because the
    kind of every metric comes from the engine map, not from the page.
    """
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if wanted(_sample_name(stripped)):
            kept.append(stripped)
    return "\n".join(kept) + ("\n" if kept else "")


def parse_text(text: str | bytes, wanted: Callable[[str], bool] | Iterable[str] | None = None) -> list[Sample]:
    """All samples of a page (only those ``wanted`` names, if given).

    Raises :class:`MetricsParseError` when the page is not Prometheus text or has no sample line at all
    (before filtering): an empty 200 answer is a broken endpoint, not "every metric is zero".
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetricsParseError(f"metrics page is not UTF-8 text ({exc})") from None
    if "\x00" in text:
        raise MetricsParseError("metrics page contains NUL bytes (binary, not Prometheus text)")
    lines = [ln.strip() for ln in text.splitlines()]
    sample_lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if not sample_lines:
        raise MetricsParseError("metrics page has no samples (empty, or only comments)")
    if wanted is not None:
        accept = wanted if callable(wanted) else frozenset(wanted).__contains__
        body = prefilter(text, accept)
    else:
        body = "\n".join(sample_lines) + "\n"
    # Even when filtering, check the first and last sample lines: garbage shows at the start (an HTML or
    # JSON error page) and truncation at the end.
    for probe in (sample_lines[0], sample_lines[-1]):
        try:
            list(text_string_to_metric_families(probe + "\n"))
        except Exception as exc:  # noqa: BLE001  (the parser raises ValueError, IndexError, ...)
            raise MetricsParseError(f"not Prometheus text: {exc}{_first_bad_line(text, None)}") from None
    try:
        families = list(text_string_to_metric_families(body))
    except Exception as exc:  # noqa: BLE001
        where = _first_bad_line(text, accept if wanted is not None else None)
        raise MetricsParseError(f"not Prometheus text: {exc}{where}") from None
    samples = []
    for family in families:
        for s in family.samples:
            value = float(s.value)
            samples.append(
                Sample(
                    name=s.name,
                    value=value,
                    labels=dict(s.labels),
                    timestamp=float(s.timestamp) if s.timestamp is not None else None,
                )
            )
    return samples


def _first_bad_line(text: str, wanted: Callable[[str], bool] | None) -> str:
    """`` (line N: ...)``: the page's first sample line (of a ``wanted`` name) the parser refuses on its own; only
    looked for once the page was refused, so that the gap names the line."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or (wanted is not None and not wanted(_sample_name(stripped))):
            continue
        try:
            list(text_string_to_metric_families(stripped + "\n"))
        except Exception:  # noqa: BLE001
            return f" (line {number}: {stripped[:120]!r})"
    return ""


def finite(samples: Iterable[Sample]) -> list[Sample]:
    return [s for s in samples if math.isfinite(s.value)]
