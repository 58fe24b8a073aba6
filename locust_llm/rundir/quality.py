"""``quality.json``, typed: the quality check's task set and every variant's answers to it.

The runtime writes the file after each variant's answers (``runtime.quality``), ``rundir.load`` reads it back and
the analysis scores the answers (``analysis.quality``). The schema is published as ``docs/quality.schema.json``
(``locust-llm schema quality``).
"""

from __future__ import annotations

from typing import Literal

from .base import RunFileModel
from .consistency import Answer

__all__ = ["QualityAnswer", "QualityFile", "QualityTask", "VariantAnswers", "quality_schema"]


class QualityTask(RunFileModel):
    """One task of the set, as asked (the scenario's ``quality:`` task with its answer length settled)."""

    prompt: str
    """The prompt sent."""
    reference: str | float | list[str]
    """What the answer is scored against; ``@baseline``: the baseline's greedy answer."""
    match: Literal["exact", "regex", "number", "json_keys"]
    """How the answer is scored against ``reference`` (``analysis.scoring``)."""
    max_tokens: int
    """Tokens asked for (the task's own, else the section's ``max_tokens``)."""
    id: str
    """The task's id (its line in the task file when it has none)."""


class QualityAnswer(RunFileModel):
    """A variant's answer to one task: greedy, or sampled with one seed."""

    item: int
    """The task's position in ``items``."""
    seed: int | None = None
    """A sampled answer's seed; absent for a greedy answer."""
    text: str | None
    """The completion's text; null when the request failed."""
    tokens: list[int] | None = None
    """A greedy answer's token ids where the server returned them (null otherwise); absent for a sampled answer."""
    error: str | None = None
    """Why there is no answer, cut to 300 characters; absent when the server answered."""

    @classmethod
    def of(cls, item: int, answer: Answer, seed: int | None = None) -> QualityAnswer:
        """A greedy answer keeps its token ids; a sampled one (``seed``) does not: only greedy answers are compared
        token by token."""
        if seed is None:
            return cls(item=item, **answer.model_dump(exclude_unset=True))
        return cls(item=item, seed=seed, **answer.model_dump(exclude_unset=True, exclude={"tokens"}))


class VariantAnswers(RunFileModel):
    """One variant's answers."""

    greedy: list[QualityAnswer] = []
    """One greedy answer per task, in the tasks' order."""
    sampled: list[QualityAnswer] = []
    """One answer per task and seed, at ``temperature`` (none at temperature 0)."""


class QualityFile(RunFileModel):
    """``quality.json``: the task set, how it was asked, and each variant's answers."""

    tasks: str
    """The task file (the built-in set when the scenario names none)."""
    temperature: float
    """The sampled answers' temperature."""
    max_drop_pct: float
    """The gate: the largest drop in pass rate from the baseline's (percentage points) a variant may show."""
    seeds: list[int]
    """The sampled answers' seeds (none at temperature 0)."""
    items: list[QualityTask]
    """The tasks, in the order asked."""
    variants: dict[str, VariantAnswers] = {}
    """Variant -> its answers; a variant whose server was started again keeps its first answers."""


def quality_schema() -> dict:
    """The JSON Schema of ``quality.json`` (written to ``docs/quality.schema.json``)."""
    return QualityFile.model_json_schema()
