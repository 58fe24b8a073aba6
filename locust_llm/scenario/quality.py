"""Quality task sets: what a configuration must still answer correctly before its throughput counts. Pure.

The scenario's ``quality:`` section names a JSONL task set (one item per line): ``{"prompt", "reference",
"match", "max_tokens"?, "id"?}``. ``match`` says how an answer is scored against ``reference``
(``analysis.scoring``); ``reference: "@baseline"`` stands for the baseline's own greedy answer to the prompt.
Omitting ``tasks`` uses the built-in set, which the tiny generated models can be scored on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from .base import Strict
from .images import escapes

__all__ = ["BASELINE_REFERENCE", "BUILTIN_TASKS", "MATCHES", "QualitySpec", "TaskItem", "read_tasks"]

BASELINE_REFERENCE = "@baseline"
BUILTIN_TASKS = Path(__file__).parent.parent / "data" / "tiny-tasks.jsonl"
MATCHES = ("exact", "regex", "number", "json_keys")
MAX_ITEMS = 5000
MAX_FILE_BYTES = 16 << 20
MAX_ANSWER_TOKENS = 100_000


class TaskItem(Strict):
    """One task: a prompt, and how its answer is judged."""

    prompt: str = Field(min_length=1)
    reference: str | float | list[str]
    match: Literal["exact", "regex", "number", "json_keys"] = "exact"
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_ANSWER_TOKENS)
    id: str | None = None

    @model_validator(mode="after")
    def _reference_fits_match(self) -> TaskItem:
        ref = self.reference
        if ref == BASELINE_REFERENCE and self.match != "exact":
            raise ValueError(f"reference {BASELINE_REFERENCE!r} (the baseline's greedy answer) needs match 'exact'")
        if self.match == "json_keys":
            if not isinstance(ref, list) or not ref:
                raise ValueError(
                    "match 'json_keys' needs reference: a non-empty list of the keys the answer's JSON object must have"
                )
        elif isinstance(ref, list):
            raise ValueError(f"a list reference is for match 'json_keys', not {self.match!r}")
        if self.match == "number":
            try:
                float(ref)
            except ValueError:
                raise ValueError(f"match 'number' needs a number as reference, found {ref!r}") from None
        elif self.match in ("exact", "regex") and not isinstance(ref, str):
            raise ValueError(f"match {self.match!r} needs a string reference (quote it), found {ref!r}")
        if self.match == "regex":
            try:
                re.compile(ref)
            except re.error as exc:
                raise ValueError(f"reference is not a valid Python regular expression ({exc})") from None
        return self


class QualitySpec(Strict):
    """The quality check run on every variant before the ladder, and its gate."""

    tasks: str | None = None  # JSONL, relative to the scenario's folder; omitted: the built-in set
    seeds: int = Field(default=3, ge=0, le=100)  # sampled answers per task (0: greedy only)
    # Sampled answers' temperature; omitted: load.temperature. At 0 every seed would repeat the greedy answer, so
    # no sampled answers are asked for.
    temperature: float | None = Field(default=None, ge=0, le=100)
    max_tokens: int = Field(default=32, ge=1, le=MAX_ANSWER_TOKENS)  # for tasks without their own
    # Exit 3 (and not eligible) when the 95% interval of a variant's pass-rate drop from the baseline's lies
    # entirely beyond this many percentage points.
    max_drop_pct: float = Field(default=5.0, ge=0, le=100)

    @field_validator("tasks")
    @classmethod
    def _inside(cls, tasks: str | None) -> str | None:
        if tasks is not None and escapes(tasks):
            raise ValueError(
                f"{tasks!r} leads out of the scenario's folder; give an absolute path, or put the task "
                "set in the scenario's folder tree"
            )
        return tasks

    def tasks_path(self, base_dir: Path) -> Path:
        if self.tasks is None:
            return BUILTIN_TASKS
        path = Path(self.tasks).expanduser()
        return path if path.is_absolute() else Path(base_dir) / path


def _item_error(exc: ValidationError) -> str:
    return "; ".join(
        (".".join(str(p) for p in e["loc"]) + ": " if e["loc"] else "") + e["msg"].removeprefix("Value error, ")
        for e in exc.errors()
    )


def read_tasks(path: Path) -> list[TaskItem]:
    """The task set at ``path``; ValueError naming the file, the line and the fix."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: task set not found (a JSONL file, one task per line)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; a task set is a few hundred tasks")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path} line {number}: not JSON ({exc.msg}); write one object per line") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} line {number}: expected an object with prompt, reference and match")
        try:
            item = TaskItem.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{path} line {number}: {_item_error(exc)}") from None
        items.append(item if item.id else item.model_copy(update={"id": f"line {number}"}))
    if not items:
        raise ValueError(
            f'{path}: no task in it; add lines such as {{"prompt": "2 + 2 =", "reference": 4, "match": "number"}}'
        )
    if len(items) > MAX_ITEMS:
        raise ValueError(f"{path}: {len(items)} tasks, at most {MAX_ITEMS}")
    twice = sorted(i for i, n in Counter(item.id for item in items).items() if n > 1)
    if twice:
        raise ValueError(f"{path}: task ids must be unique; {', '.join(map(repr, twice[:3]))} occur more than once")
    return items
