"""The report's headline: one verdict card per comparison (speed-up at the lowest level measured cleanly, crossover,
consistency, recommendation) and the warnings that qualify every figure. Built once from the typed summary as
frozen records; the HTML template (``verdict.html.j2``, also alone in the web UI) and ``summary.md.j2`` both show
them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..analysis.documents.summary import Comparison, StepComparison
from ..analysis.quality import not_eligible
from ..analysis.speedup import speedup_state
from ..fmt import ci_text, is_number, lvl, pct, points, times
from ..rundir.events import Interrupted, Unfinished
from .prompt_cache import cache_warnings
from .view import RunView, unit_of

__all__ = ["FLAG_TEXT", "Card", "Headline", "LevelBadge", "flagged_steps", "headline", "quality_line"]

JUDGED = ("clean", "inconclusive")  # the statuses whose speed-up is shown: every other step is left out


@dataclass(frozen=True)
class LevelBadge:
    """One level of a comparison on its card: its status, and its speed-up where the level is judged."""

    level: str
    status: str
    speedup: str | None
    pairs: str | None  # "1 of 2 pairs: period effect not balanced" when the verdict rests on fewer than planned


@dataclass(frozen=True)
class Card:
    """A variant against the baseline in words and figures, as the verdict shows it."""

    variant: str
    baseline: str
    state: str  # better / worse / unclear: the lowest judged level's verdict (unclear unless it is clean)
    speedup: str | None
    ci: str | None
    level: str | None  # the lowest level measured cleanly on both sides, or inconclusive
    unit: str
    crossover: str
    recommendation: str
    metric_name: str
    agreement: str | None  # greedy output agreement with the baseline, in percent (None: not measured)
    identical: int | None
    compared: int | None
    defect: bool
    greedy: str | None  # the greedy check in words (``analysis.greedy``; None: a run before it)
    color: str
    not_eligible: str | None  # why the quality gate keeps the variant from every recommendation
    quality: str | None
    levels: tuple[LevelBadge, ...]


@dataclass(frozen=True)
class Headline:
    """The cards, the warnings (most serious first), and a note when there is nothing to compare."""

    cards: tuple[Card, ...]
    warnings: tuple[str, ...]
    note: str | None


def flagged_steps(view: RunView) -> dict[str, list[str]]:
    """Steps by what is wrong with them: each status other than clean (with its reason), anomalies, failures."""
    flags: dict[str, list[str]] = {
        "fault-injected": [],
        "worker-lost": [],
        "suspect-usage": [],
        "failed-fast": [],
        "contended": [],
        "client-invalid": [],
        "insufficient": [],
        "unsteady": [],
        "too-noisy": [],
        "anomaly": [],
        "failed": [],
    }
    for name in view.names:
        for s in view.steps_of(name):
            if s.status in flags:
                flags[s.status].append(
                    f"{view.where(name, s)} ({s.status_reasons[0].split(': ', 1)[-1]})"
                    if s.status_reasons
                    else view.where(name, s)
                )
            if s.anomaly:
                flags["anomaly"].append(f"{view.where(name, s)}: {s.anomaly}")
            if not s.requests or (s.errors and s.errors == s.requests):
                flags["failed"].append(view.where(name, s))
    return flags


FLAG_TEXT = {
    "fault-injected": "step(s) with a fault injected on purpose (probes.faults; left out of every verdict)",
    "worker-lost": "step(s) during which a load process was lost (worker-lost: the level was not held; "
    "left out of every verdict)",
    "suspect-usage": "step(s) whose server token counts disagree with the requests or their text (suspect-usage; "
    "left out of every verdict)",
    "failed-fast": "step(s) where the server refused or failed fast: most requests were refused or failed within 10 "
    "ms, before any token (failed-fast; left out of every verdict)",
    "contended": "step(s) measured while the host was busy with other work (contended; left out of every verdict)",
    "client-invalid": "step(s) where the load generator may have been the bottleneck (client-invalid; left "
    "out of every verdict)",
    "insufficient": "step(s) with too few completed requests (insufficient; left out of every verdict)",
    "unsteady": "step(s) not steady within the window (left out of every verdict)",
    "too-noisy": "step(s) too noisy to tell steady from drifting (too-noisy: a longer step can; left out of every "
    "verdict)",
    "anomaly": "anomalous step(s)",
}


def headline(view: RunView) -> Headline:
    """One card per comparison, and the warnings."""
    blocked = not_eligible(view.summary.quality)
    cards = tuple(_card(view, comp, blocked.get(comp.variant)) for comp in view.comparisons)
    note = None
    if not cards:
        note = (
            "single variant: no baseline-vs-variant comparison was measured"
            if len(view.variants) <= 1
            else "no comparison in summary.json (is the baseline variant present?)"
        )
    return Headline(cards, tuple(_warnings(view, cards)), note)


def _card(view: RunView, comp: Comparison, blocked: str | None) -> Card:
    steps = sorted(comp.steps, key=lambda s: s.level)
    judged = [s for s in steps if s.status in JUDGED]
    low = judged[0] if judged else None
    speed = getattr(low, f"{comp.metric}_speedup", None) if low else None
    # A level's verdict (open loop: latency and goodput together), or the speed-up's own CI in older runs.
    state = (low.verdict or speedup_state(speed)) if low is not None and speed and low.status == "clean" else "unclear"
    # Every greedy comparison (consistency prompts and quality tasks) where the run has the check, else the prompts'.
    check, prompts = view.summary.greedy.get(comp.variant), view.summary.consistency.get(comp.variant)
    counted = check or prompts
    return Card(
        variant=comp.variant,
        baseline=comp.baseline,
        state=state,
        speedup=times(speed.value) if speed else None,
        ci=ci_text(speed.ci95, times) if speed else None,
        level=lvl(low.level) if low else None,
        unit=unit_of(view.mode, plural=not (low and low.level == 1)),
        crossover=_crossover_text(view, comp, steps, judged),
        recommendation=comp.recommendation or "no recommendation",
        metric_name=comp.metric_name or "aggregate output tok/s",
        agreement=pct(counted.identical / counted.compared, 0) if counted and counted.compared else None,
        identical=counted.identical if counted else None,
        compared=counted.compared if counted else None,
        defect=bool(check.diverged) if check else bool(prompts and prompts.defect),
        greedy=check.text if check else None,
        color=view.color(comp.variant),
        not_eligible=blocked,
        quality=quality_line(view, comp.variant),
        levels=tuple(
            LevelBadge(
                lvl(s.level),
                s.status,
                times(getattr(s, f"{comp.metric}_speedup").value) if s.status in JUDGED else None,
                s.pairs_note if s.status in JUDGED else None,
            )
            for s in steps
        ),
    )


def _crossover_text(view: RunView, comp: Comparison, steps: list[StepComparison], judged: list[StepComparison]) -> str:
    crossover = comp.crossover_level
    if is_number(crossover):
        why = next((s.verdict_basis for s in steps if s.level == crossover and s.verdict_basis), None)
        why = why if view.mode == "open" and why else "speed-up CI entirely below 1"  # open: which figure
        return (
            f"crossover at {lvl(crossover)} {unit_of(view.mode, crossover != 1)}: from there "
            f"{comp.variant} is slower than {comp.baseline} ({why})"
        )
    if judged:
        return (
            f"no crossover up to {lvl(judged[-1].level)} {unit_of(view.mode)}: at no level "
            f"measured cleanly is {comp.variant} clearly slower"
        )
    if steps:
        return "no crossover: no level was measured cleanly on both sides"
    return "no crossover: no level was measured for both variants"


def _warnings(view: RunView, cards: tuple[Card, ...]) -> list[str]:
    """Flagged steps, prompt-cache hits, run events and failed requests; an interruption, a consistency defect or
    a variant the quality gate rules out first."""
    flags = flagged_steps(view)
    warnings = [
        f"{len(flags[kind])} {text}: {'; '.join(flags[kind])}" for kind, text in FLAG_TEXT.items() if flags[kind]
    ]
    if flags["failed"]:
        warnings.append(f"{len(flags['failed'])} step(s) with no successful request: {', '.join(flags['failed'])}")
    warnings += cache_warnings(view)
    events = view.summary.events
    for event in events:
        if isinstance(event, Interrupted) and is_number(event.t):
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(event.t))
            warnings.insert(
                0,
                f"interrupted at {when} by {event.signal}: every figure covers only what was measured until then",
            )
        elif isinstance(event, Unfinished):
            warnings.insert(
                0,
                "the run has not finished (it is still running, or was killed): its open steps end at "
                "the last record, and every figure covers only what was recorded until then",
            )
    if events:
        kinds = sorted({e.kind for e in events})
        warnings.append(f"{len(events)} run event(s): {', '.join(kinds)}")
    errored = [
        f"{view.where(n, s)} ({pct(s.error_rate)})"
        for n in view.names
        for s in view.steps_of(n)
        if is_number(s.error_rate) and s.error_rate > 0
    ]
    if errored:
        warnings.append("failed requests (counted against every figure): " + ", ".join(errored))
    for card in cards:
        if card.not_eligible:
            warnings.insert(0, f"{card.variant} is not eligible for any recommendation: {card.not_eligible}")
        if card.defect:
            warnings.insert(
                0,
                f"greedy check of {card.variant}: {card.greedy}"
                if card.greedy
                else f"consistency defect: {card.variant}'s greedy output differs from "
                f"{card.baseline}'s; lossless speculative decoding must not change it",
            )
    return warnings


def quality_line(view: RunView, variant: str) -> str | None:
    """The card's quality words for an eligible variant: the pass-rate differences from the baseline."""
    figures = view.summary.quality.variants.get(variant) if view.summary.quality else None
    if figures is None or not figures.eligible:
        return None
    parts = [
        f"{kind} {points(rate.difference)} points"
        for kind, rate in (("greedy", figures.greedy), ("sampled", figures.sampled))
        if rate is not None and rate.difference is not None
    ]
    return "quality gate passed" + (f": pass rate vs the baseline {', '.join(parts)}" if parts else "")
