"""Datasets: JSONL (``prompt``, optional ``max_tokens``/``output_tokens``, ``bucket``) and ShareGPT JSON.

Errors name the file, the line (and column) and what is wrong. JSONL lines end at ``\n`` only, as JSON has it:
U+2028, U+2029 and U+0085 are characters inside a JSON string (``json.dumps(ensure_ascii=False)`` writes them raw),
not line ends. A leading UTF-8 byte-order mark is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..scenario import describe_value
from .items import WorkloadError

__all__ = ["DatasetRecord", "read_dataset"]

HUMAN_ROLES = ("human", "user")
ANSWER_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")


@dataclass(frozen=True)
class DatasetRecord:
    prompt: str
    max_tokens: int | None
    answer: str | None
    bucket: str | None
    where: str  # "file:line"
    # ShareGPT: every human turn with the answer recorded after it (None: none), for multi-turn conversations.
    turns: tuple[tuple[str, str | None], ...] = ()


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _jsonl_record(obj: Any, where: str) -> DatasetRecord | None:
    if not isinstance(obj, dict):
        raise WorkloadError(
            f"{where}: expected a JSON object with a 'prompt' string, found {type(obj).__name__} {describe_value(obj)}"
        )
    if "conversations" in obj:
        return _sharegpt_record(obj, where)
    if "prompt" not in obj:
        raise WorkloadError(
            f"{where}: missing key 'prompt' (a non-empty string); keys found: {', '.join(map(str, obj)) or 'none'}"
        )
    prompt = obj["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkloadError(f"{where}: 'prompt' must be a non-empty string, found {describe_value(prompt)}")
    max_tokens = None
    for key in ("max_tokens", "output_tokens"):
        if key in obj:
            if not _positive_int(obj[key]):
                raise WorkloadError(f"{where}: {key!r} must be a positive integer, found {describe_value(obj[key])}")
            max_tokens = obj[key]
            break
    bucket = obj.get("bucket")
    if bucket is not None and (not isinstance(bucket, str) or not bucket):
        raise WorkloadError(f"{where}: 'bucket' must be a non-empty string, found {describe_value(bucket)}")
    return DatasetRecord(prompt, max_tokens, None, bucket, where)


def _sharegpt_record(obj: Any, where: str) -> DatasetRecord | None:
    """First human turn = prompt, the next answer turn = reference output; None if no prompt. Every human turn
    with its answer is kept in ``turns`` (conversations send them one per turn)."""
    if not isinstance(obj, dict):
        raise WorkloadError(
            f"{where}: expected a conversation object with a 'conversations' list, found "
            f"{type(obj).__name__} {describe_value(obj)}"
        )
    turns = obj.get("conversations")
    if not isinstance(turns, list):
        raise WorkloadError(
            f"{where}: 'conversations' must be a list of {{'from': ..., 'value': ...}} turns, "
            f"found {describe_value(turns)}"
        )
    pairs: list[list] = []  # [human text, the answer after it]
    first_blank = None  # the first human turn is empty: no prompt (the conversation is skipped)
    for i, turn in enumerate(turns):
        if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)):
            raise WorkloadError(
                f"{where}: conversations[{i}] must be an object with string 'from' and 'value', "
                f"found {describe_value(turn)}"
            )
        role = turn["from"].lower()
        if role in HUMAN_ROLES:
            first_blank = not turn["value"].strip() if first_blank is None else first_blank
            if turn["value"].strip():
                pairs.append([turn["value"], None])
        elif pairs and role in ANSWER_ROLES and pairs[-1][1] is None:
            pairs[-1][1] = turn["value"]
    if not pairs or first_blank:
        return None
    prompt, answer = pairs[0]
    return DatasetRecord(prompt, None, answer, None, where, tuple(map(tuple, pairs)))


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _read_sharegpt(path: Path, text: str) -> tuple[list[DatasetRecord], int]:
    """A top-level JSON list, decoded one element at a time so errors can name the element's line."""
    decoder = json.JSONDecoder()
    records, skipped = [], 0
    i = _skip_ws(text, 0) + 1  # past '['
    line, line_pos = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, line_pos
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        return line

    while True:
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == "]" and not records and not skipped:
            break
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
        record = _sharegpt_record(obj, f"{path}:{line_at(i)}")
        if record is None:
            skipped += 1
        else:
            records.append(record)
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "]":
            break
        raise WorkloadError(
            f"{path}:{line_at(min(i, len(text)))}: not valid JSON: expected ',' or ']' after a conversation"
        )
    rest = _skip_ws(text, i + 1)
    if rest < len(text):
        raise WorkloadError(f"{path}:{line_at(rest)}: not valid JSON: extra data after the closing ']'")
    return records, skipped


def read_dataset(path: str | Path) -> tuple[list[DatasetRecord], int]:
    """Parse a JSONL or ShareGPT JSON file -> (records, number of conversations skipped for having
    no human turn). Errors name the file, the line and what is wrong."""
    path = Path(path)
    if path.is_dir():
        raise WorkloadError(f"{path}: is a directory; load.dataset names one JSONL or ShareGPT JSON file")
    if not path.is_file():
        raise WorkloadError(f"{path}: dataset file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark some editors write is not content
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from None
    first = _skip_ws(text, 0)
    if first < len(text) and text[first] == "[" and path.suffix.lower() != ".jsonl":
        records, skipped = _read_sharegpt(path, text)
    else:
        records, skipped = [], 0
        for lineno, raw in enumerate(text.split("\n"), start=1):  # not splitlines(): see the module's docstring
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise WorkloadError(
                    f"{path}:{lineno}:{exc.colno}: not valid JSON: {exc.msg}; "
                    "JSONL needs one complete JSON object per line"
                ) from None
            record = _jsonl_record(obj, f"{path}:{lineno}")
            if record is None:
                skipped += 1
            else:
                records.append(record)
    if not records:
        raise WorkloadError(
            f"{path}: no usable prompts ("
            + (f"{skipped} conversations without a human turn" if skipped else "no entries")
            + ")"
        )
    return records, skipped
