"""The quality documents of ``summary.json``, typed: greedy agreement with the baseline (the consistency prompts'
``Agreement``, and the quality tasks'), and the quality check (``Summary.quality``): pass rates with intervals,
the difference from the baseline, the failing answers, and which variants are eligible (``analysis.quality``).
"""

from __future__ import annotations

from .base import Doc, Interval

__all__ = [
    "Agreement",
    "FailedAnswer",
    "GreedyCheck",
    "GreedyDivergence",
    "PairCounts",
    "PassRate",
    "PromptAgreement",
    "QualitySummary",
    "VariantQuality",
]


class PromptAgreement(Doc):
    prompt_id: str | None = None
    """The fixed prompt."""
    status: str
    """``identical``, ``diverged`` or ``error``."""
    unit: str | None = None
    """``token`` or ``char``: what was compared."""
    length: int | None = None
    """The baseline's output length in that unit."""
    first_divergence: int | None = None
    """Index of the first difference."""
    error: str | None = None
    """Why the prompt could not be compared."""
    baseline_text: str | None = None
    """The baseline's output (cut)."""
    variant_text: str | None = None
    """The variant's output (cut)."""


class Agreement(Doc):
    """Greedy output agreement of a variant with the baseline on fixed prompts."""

    prompts: list[PromptAgreement] = []
    """Per prompt."""
    compared: int = 0
    """Prompts both sides answered."""
    identical: int = 0
    """Prompts with identical output."""
    agreement: float | None = None
    """identical / compared."""
    defect: bool = False
    """Any divergence: lossless speculation must not change greedy output."""


class GreedyDivergence(Doc):
    """One greedy answer of a variant that differs from the baseline's."""

    source: str
    """``consistency prompt`` or ``quality task``."""
    prompt_id: str | None = None
    """The prompt's or task's id."""
    unit: str | None = None
    """``token`` or ``char``: what was compared."""
    first_divergence: int | None = None
    """Index of the first difference."""
    length: int | None = None
    """The baseline's answer length in that unit."""


class GreedyCheck(Doc):
    """Every greedy comparison of a variant with the baseline in one figure (``analysis.greedy``)."""

    compared: int = 0
    """Greedy answers compared: the consistency prompts and the quality tasks both sides answered."""
    identical: int = 0
    """Of them, identical to the baseline's."""
    diverged: list[GreedyDivergence] = []
    """Every one that differs, named."""
    baseline_repeat: str = "not asked"
    """The baseline asked the consistency prompts twice: ``identical`` (it repeated itself), ``diverged`` (it did not:
    the server is not deterministic even alone), ``not asked`` (a run before this check, or the answers failed)."""
    cause: str | None = None
    """Of a divergence: ``speculative decoding`` (the baseline repeated itself), ``engine nondeterminism`` (it did
    not), ``unknown`` (no repeat); null when nothing diverged."""
    text: str = ""
    """The check in words, as the verdict prints it."""


class PairCounts(Doc):
    """The answers paired with the baseline's (same task; sampled: same task and seed), by who passed."""

    both: int = 0
    """Pairs where both passed."""
    variant_only: int = 0
    """Pairs where only the variant passed."""
    baseline_only: int = 0
    """Pairs where only the baseline passed."""
    neither: int = 0
    """Pairs where neither passed."""


class PassRate(Doc):
    """One kind of answer (greedy, or sampled) of one variant, scored against the task set's references."""

    answers: int = 0
    """Answers scored (tasks whose reference is known; an answer the server failed to give counts as failed)."""
    passed: int = 0
    """Answers that matched their reference."""
    errors: int = 0
    """Answers the server failed to give (counted as failed)."""
    rate: float | None = None
    """passed / answers."""
    rate_ci95: Interval = None
    """Wilson score 95% interval of ``rate``."""
    pairs: int = 0
    """Answers paired with the baseline's."""
    pair_counts: PairCounts | None = None
    """The pairs by who passed (null for the baseline itself)."""
    baseline_rate: float | None = None
    """The baseline's pass rate over the same pairs."""
    difference: float | None = None
    """rate - baseline_rate over the pairs (negative: the variant answers worse)."""
    difference_ci95: Interval = None
    """Newcombe's hybrid score 95% interval for the difference of paired proportions."""
    beyond_limit: bool = False
    """The whole interval of the drop (-difference) lies beyond ``max_drop_pct``: the quality gate fails."""


class FailedAnswer(Doc):
    """An answer that did not match its reference (server text: escape before display)."""

    item: str
    """The task's id."""
    kind: str
    """``greedy`` or ``sampled``."""
    seed: int | None = None
    """The sampled answer's seed."""
    prompt: str
    """The prompt (cut)."""
    expected: str
    """What would have passed, in words (cut)."""
    got: str | None = None
    """The answer (cut); null when the server gave none."""
    error: str | None = None
    """Why the server gave no answer."""


class VariantQuality(Doc):
    variant: str
    """The variant."""
    answered: bool = False
    """Its server answered the task set."""
    agreement: Agreement | None = None
    """Greedy answers against the baseline's, token by token (null for the baseline)."""
    greedy: PassRate | None = None
    """Greedy answers (temperature 0), one per task."""
    sampled: PassRate | None = None
    """Sampled answers, one per task and seed (null: none asked, at temperature 0)."""
    failing: list[FailedAnswer] = []
    """Answers that failed (the first ones; ``failing_total`` counts them all)."""
    failing_total: int = 0
    """Every failed answer, greedy and sampled."""
    eligible: bool = True
    """May be recommended: the baseline, or a variant whose quality gate passed. Speed-ups, crossover,
    recommendations, sweep choices and cost use eligible variants only."""
    reason: str | None = None
    """Why it is not eligible."""
    text: str = ""
    """The figures and the verdict in one line."""


class QualitySummary(Doc):
    """The quality check: the scenario's task set asked of every variant before the ladder (``quality.json``)."""

    tasks: str
    """The task set's file."""
    items: int
    """Tasks in it."""
    seeds: list[int] = []
    """Seeds of the sampled answers (empty: greedy only)."""
    temperature: float
    """Temperature of the sampled answers."""
    max_drop_pct: float
    """The gate: largest pass-rate drop from the baseline, in percentage points, that the drop's interval may lie
    entirely beyond before the variant fails."""
    method: str
    """How rates, differences and the gate are computed, in words."""
    unscored: list[str] = []
    """Tasks left out of every score: their reference is the baseline's answer, and the baseline gave none."""
    variants: dict[str, VariantQuality] = {}
    """Per variant, the baseline first."""
    judged: bool = True
    """False when the run measured no baseline (``--host`` with one variant): the gate compares each variant with
    the baseline, so it is not judged; the pass rates are shown and every variant stays eligible."""
    text: str
    """The gate's outcome in one sentence."""
