"""Capacity under the SLO gates: per variant, the highest level that meets every gate set (P99 TTFT, P99 TTFOT, P99
TPOT, error rate), with its uncertainty, and the speed-up read as capacity ("at TTFT P99 <= 500 ms, spec-k4 holds 6
users, the baseline 4"). Pure: from the summary's per-step figures and the gates.

A step *meets* a gate when the whole 95% interval of its figure lies within the limit, *fails* when the whole interval
lies beyond it, and leaves it *open* otherwise (or when it has no interval): the data cannot say yet. Only clean steps
are judged. A level meets when each of its clean steps meets every gate, fails when one fails one; the capacity is
the highest level reached through meeting levels only. The next level to measure: the midpoint between it and the
first level that fails (a bisection, as GuideLLM and AIPerf search), or the first open level again, for longer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..fmt import lvl
from ..scenario import GatesSpec
from .documents.summary import StepFigures, Summary
from .gates import SLO_GATES
from .proportions import wilson_interval

__all__ = ["Capacity", "capacities", "capacity_lines"]

State = Literal["meets", "fails", "open"]
WORDS = {"ttft_p99_ms": "TTFT P99", "ttfot_p99_ms": "TTFOT P99", "tpot_p99_ms": "TPOT P99", "error_rate": "errors"}


@dataclass
class Capacity:
    variant: str
    level: float | None  # the highest level reached through meeting levels (None: not even the lowest)
    failing: float | None  # the first level above it, when that level fails (None: it does not, or none is)
    open_levels: list[float] = field(default_factory=list)  # levels the data cannot judge yet
    next_level: float | None = None  # where a search would measure next (None: the answer is not open)


def _interval(step: StepFigures, gate: str) -> tuple[float, float] | None:
    """The 95% interval of the step's figure for ``gate`` (failures included, as the gate judges it)."""
    if gate == "error_rate":
        found = wilson_interval(step.errors, step.requests) if step.requests else None
        return (found[0], found[1]) if found else None
    figures, key = SLO_GATES[gate]
    if key is None:
        return None
    figure = getattr(step, figures.get(step.mode, figures["closed"]))
    bounds = getattr(figure.ci95, key) if figure is not None and figure.ci95 is not None else None
    return (bounds[0], bounds[1]) if bounds and None not in bounds else None


def step_state(step: StepFigures, gates: GatesSpec) -> State:
    states = []
    for gate in SLO_GATES:
        limit = getattr(gates, gate)
        if limit is None:
            continue
        bounds = _interval(step, gate)
        if bounds is None:
            states.append("open")
        elif bounds[0] > limit:
            states.append("fails")
        elif bounds[1] <= limit:
            states.append("meets")
        else:
            states.append("open")
    if "fails" in states:
        return "fails"
    return "open" if "open" in states or not states else "meets"


def capacities(summary: Summary, gates: GatesSpec) -> list[Capacity]:
    """Per variant (the summary's order), its capacity under ``gates``; empty when no latency gate is set (the error
    rate alone, on by default, is judged with them, not alone)."""
    if all(getattr(gates, gate) is None for gate in SLO_GATES if gate != "error_rate"):
        return []
    out = []
    for variant, entry in summary.variants.items():
        by_level: dict[float, list[State]] = {}
        for step in entry.steps:
            if step.context:
                continue
            by_level.setdefault(step.level, []).append(step_state(step, gates) if step.status == "clean" else "open")
        level_states = {
            level: "fails" if "fails" in states else "open" if "open" in states else "meets"
            for level, states in sorted(by_level.items())
        }
        capacity, stop = None, None  # stop: the first level that does not meet
        for level, state in level_states.items():
            if state != "meets":
                stop = level
                break
            capacity = level
        failing = stop if stop is not None and level_states[stop] == "fails" else None
        open_levels = [level for level, state in level_states.items() if state == "open"]
        next_level = None
        if failing is not None:
            next_level = ((capacity or 0.0) + failing) / 2  # between the last level that meets and the first that fails
        elif stop is not None:
            next_level = stop  # open: the same level again, longer, narrows its interval
        out.append(Capacity(variant, capacity, failing, open_levels, next_level))
    return out


def _limits(gates: GatesSpec) -> str:
    parts = []
    for gate, word in WORDS.items():
        limit = getattr(gates, gate)
        if limit is not None:
            parts.append(f"{word} <= {limit:.0%}" if gate == "error_rate" else f"{word} <= {limit:g} ms")
    return ", ".join(parts)


def capacity_lines(summary: Summary, gates: GatesSpec) -> list[str]:
    """The console's lines: each variant's capacity, and the speed-up read as capacity against the baseline."""
    found = capacities(summary, gates)
    if not found:
        return []
    unit = "req/s" if any(s.mode == "open" for e in summary.variants.values() for s in e.steps) else "users"
    lines = [f"capacity under the gates ({_limits(gates)}; 95% intervals within the limits):"]
    for cap in found:
        held = f"holds {lvl(cap.level)} {unit}" if cap.level is not None else "holds no measured level"
        beyond = f", fails at {lvl(cap.failing)}" if cap.failing is not None else ""
        still = f"; open at {', '.join(lvl(x) for x in cap.open_levels)}" if cap.open_levels else ""
        search = f"; measure {lvl(cap.next_level)} next" if cap.next_level is not None else ""
        lines.append(f"  {cap.variant}: {held}{beyond}{still}{search}")
    base = next((c for c in found if c.variant == summary.baseline), None)
    for cap in found:
        if base is None or cap is base or cap.level is None or base.level is None:
            continue
        lines.append(
            f"  {cap.variant} holds {lvl(cap.level)} {unit}, the baseline {lvl(base.level)}: "
            f"{cap.level / base.level:.2f}x the capacity (levels measured, not interpolated)"
        )
    return lines
