"""Trace files -> ``Trace``: each record's arrival time and prompt/output lengths, cut to the replayed window. Pure.

Formats, as their public files have them:

* **Mooncake** (JSONL): ``timestamp`` in ms, ``input_length``, ``output_length``, optional ``hash_ids`` (one id per
  block of ``block_tokens`` prompt tokens; requests that share a leading id share that block of prompt text).
* **Azure LLM inference** (CSV): ``TIMESTAMP`` (a date-time such as ``2023-11-16 18:15:46.6805900``, or seconds),
  ``ContextTokens``, ``GeneratedTokens``.
* **BurstGPT** (CSV): ``Timestamp`` in s, ``Request tokens``, ``Response tokens``; a failed request is logged with
  0 response tokens: such rows are skipped and counted.

A record with no prompt or no output (a zero length) is skipped and counted the same way; a record that cannot be
read (a missing or non-numeric field, a negative length, a timestamp earlier than the one before) is an error that
names the file, the line and the field. Times are relative to the first record, then to the window's start.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..scenario import describe_value
from ..scenario.traffic import TraceSpec
from .items import WorkloadError

__all__ = ["Trace", "TraceRecord", "read_trace"]

# Columns per CSV format: time, prompt tokens, output tokens.
CSV_COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}
MAX_LENGTH = 10_000_000
DATETIME = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(\.\d+)?\s*(Z|[+-]\d{2}:?\d{2})?$",
)


@dataclass(frozen=True)
class TraceRecord:
    t_s: float  # seconds after the window's start, at speed 1
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]  # Mooncake prompt blocks; () where the trace has none
    where: str  # "file:line"


@dataclass(frozen=True)
class Trace:
    """The replayed window of a trace file, and what was left out of it."""

    path: str
    format: str
    records: tuple[TraceRecord, ...]
    span_s: float  # the window's length at speed 1 (its duration_s, else first to last record)
    rows: int  # data rows in the file
    outside: int  # readable records outside the window
    skipped: dict[str, int] = field(default_factory=dict)  # rows not replayed, by reason
    block_tokens: int = 512

    @property
    def rate(self) -> float:
        """Records per second at speed 1 (the offered rate a speed multiplies)."""
        return len(self.records) / self.span_s

    def describe(self) -> dict[str, Any]:
        seen: set[int] = set()
        shared = 0
        for record in self.records:
            shared += sum(1 for h in record.hash_ids if h in seen)
            seen.update(record.hash_ids)
        return {
            "file": self.path,
            "format": self.format,
            "rows": self.rows,
            "records": len(self.records),
            "outside_window": self.outside,
            "skipped_rows": dict(self.skipped),
            "span_s": self.span_s,
            "rate_rps": self.rate,
            "block_tokens": self.block_tokens if self.format == "mooncake" else None,
            "blocks": sum(len(r.hash_ids) for r in self.records),
            "shared_blocks": shared,
            "input_tokens": sum(r.input_tokens for r in self.records),
            "output_tokens": sum(r.output_tokens for r in self.records),
        }


def _length(value: Any, where: str, name: str) -> int:
    number = value
    if isinstance(value, str):
        text = value.strip()
        try:
            number = int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
        except ValueError:
            number = None
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_LENGTH:
        raise WorkloadError(
            f"{where}: {name!r} must be a token count (an integer from 0 to {MAX_LENGTH}), "
            f"found {describe_value(value)}"
        )
    return number


def _seconds(value: Any, where: str, name: str, scale: float = 1.0) -> float:
    """A timestamp in seconds: a number (times ``scale``) or, in CSV files, a date-time."""
    if isinstance(value, str):
        text = value.strip()
        match = DATETIME.match(text)
        if match:
            date, clock, fraction, zone = match.groups()
            base = datetime.strptime(f"{date} {clock}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
            if zone and zone != "Z":
                sign = -1 if zone[0] == "-" else 1
                hours, minutes = int(zone[1:3]), int(zone[-2:])
                base -= sign * timedelta(hours=hours, minutes=minutes)
            return base.timestamp() + (float(fraction) if fraction else 0.0)
        try:
            value = float(text)
        except ValueError:
            value = text
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise WorkloadError(
            f"{where}: {name!r} must be a time (a number >= 0, or a date-time such as 2023-11-16 18:15:46.68), "
            f"found {describe_value(value)}"
        )
    return float(value) * scale


def _mooncake(path: Path, text: str) -> Iterator[tuple[str, float, int, int, tuple[int, ...]]]:
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise WorkloadError(
                f"{where}: not valid JSON: {exc.msg} (column {exc.colno}); a Mooncake trace has one JSON object per "
                "line"
            ) from None
        if not isinstance(obj, dict):
            raise WorkloadError(f"{where}: expected a JSON object, found {describe_value(obj)}")
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise WorkloadError(f"{where}: missing field {key!r}; keys found: {', '.join(map(str, obj)) or 'none'}")
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            raise WorkloadError(f"{where}: 'hash_ids' must be a list of integers >= 0, found {describe_value(ids)}")
        yield (
            where,
            _seconds(obj["timestamp"], where, "timestamp", scale=1e-3),
            _length(obj["input_length"], where, "input_length"),
            _length(obj["output_length"], where, "output_length"),
            tuple(ids),
        )


def _csv(path: Path, text: str, fmt: str) -> Iterator[tuple[str, float, int, int, tuple[int, ...]]]:
    time_col, input_col, output_col = CSV_COLUMNS[fmt]
    reader = csv.DictReader(text.splitlines())
    columns = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in (time_col, input_col, output_col) if c not in columns]
    if missing:
        raise WorkloadError(
            f"{path}:1: no column {missing[0]!r} in the header (found: {', '.join(columns) or 'none'}); a {fmt} trace "
            f"has {time_col}, {input_col} and {output_col}"
        )
    for row in reader:
        where = f"{path}:{reader.line_num}"
        row = {str(k).strip(): v for k, v in row.items()}
        for name in (time_col, input_col, output_col):
            if row.get(name) in (None, ""):
                raise WorkloadError(f"{where}: no value in column {name!r}")
        yield (
            where,
            _seconds(row[time_col], where, time_col),
            _length(row[input_col], where, input_col),
            _length(row[output_col], where, output_col),
            (),
        )


def _check_blocks(where: str, ids: tuple[int, ...], input_tokens: int, block_tokens: int) -> None:
    """Mooncake's hash ids cover the prompt in blocks: all full but the last."""
    if ids and not (len(ids) - 1) * block_tokens < input_tokens <= len(ids) * block_tokens:
        need = math.ceil(input_tokens / block_tokens)
        raise WorkloadError(
            f"{where}: 'hash_ids' has {len(ids)} blocks for input_length {input_tokens}, which needs {need} blocks of "
            f"{block_tokens} tokens; set load.trace.block_tokens to the trace's own block size"
        )


def read_trace(spec: TraceSpec, path: str | Path) -> Trace:
    """Parse ``path`` in ``spec.format`` and cut it to the window ``[start_s, start_s + duration_s)``."""
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"{path}: trace file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    rows = _mooncake(path, text) if spec.format == "mooncake" else _csv(path, text, spec.format)
    end = spec.start_s + spec.duration_s if spec.duration_s is not None else math.inf
    records, skipped, outside, count = [], {}, 0, 0
    first = previous = None
    for where, t, input_tokens, output_tokens, ids in rows:
        count += 1
        if previous is not None and t < previous:
            raise WorkloadError(
                f"{where}: timestamp {t - first:.3f} s after the first record is earlier than the record before "
                f"({previous - first:.3f} s); a trace must be in time order"
            )
        first = t if first is None else first
        previous = t
        if output_tokens == 0:
            reason = "failed (Response tokens 0)" if spec.format == "burstgpt" else "no output tokens"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if input_tokens == 0:
            skipped["no prompt tokens"] = skipped.get("no prompt tokens", 0) + 1
            continue
        _check_blocks(where, ids, input_tokens, spec.block_tokens)
        offset = t - first
        if not spec.start_s <= offset < end:
            outside += 1
            continue
        records.append(TraceRecord(offset - spec.start_s, input_tokens, output_tokens, ids, where))
    if not records:
        raise WorkloadError(
            f"{path}: no record to replay ({count} rows; {outside} outside the window start_s={spec.start_s:g}"
            + (f", duration_s={spec.duration_s:g}" if spec.duration_s is not None else "")
            + (f"; skipped: {skipped}" if skipped else "")
            + ")"
        )
    span = spec.duration_s if spec.duration_s is not None else records[-1].t_s
    if span <= 0:
        raise WorkloadError(
            f"{path}: the {len(records)} records of the window all arrive at one instant; give "
            "load.trace.duration_s (the seconds they are spread over)"
        )
    return Trace(str(path), spec.format, tuple(records), span, count, outside, skipped, spec.block_tokens)
