"""The probes' part of the report: the probe table (one row per probe and fault), each fault beside the requests it
hit and its neighbouring steps, and the lines the console and ``summary.md`` print. Presents ``summary.probes``
only; every server text (error messages) is autoescaped by the template and cut here."""

from __future__ import annotations

from ..analysis.documents.probes import ProbeRow, StepLatency
from ..analysis.documents.summary import Summary
from ..analysis.errors import MESSAGE_MAX, clip
from ..fmt import lvl, num
from .view import RunView

__all__ = ["probe_lines", "probes_section"]

VERDICT_CLASS = {"ok": "ok", "unexpected": "warn", "server-failed": "bad", "not-run": "nm"}


def seconds(value_ms: float | None) -> str | None:
    """A duration as people read it: ms below a second, else seconds."""
    if value_ms is None:
        return None
    return f"{num(value_ms)} ms" if value_ms < 1000 else f"{num(value_ms / 1e3)} s"


def step_text(step: StepLatency | None) -> str | None:
    if step is None:
        return None
    return (
        f"step {step.step} (level {lvl(step.level)}, {step.status}): TTFT P99 "
        f"{seconds(step.ttft_p99_ms) or 'n/m'}, E2E P99 {seconds(step.e2e_p99_ms) or 'n/m'}, {step.errors} of "
        f"{step.requests} failed"
    )


def p99s(step: StepLatency) -> str:
    return f"{seconds(step.ttft_p99_ms) or 'n/m'} / {seconds(step.e2e_p99_ms) or 'n/m'}"


def fault_text(row: ProbeRow) -> str:
    """A fault and what it did, in one sentence."""
    figures = row.figures
    text = f"{row.probe} of {row.variant} in step {row.step} (level {lvl(row.level)}): {row.answer}"
    if figures is not None:
        text += (
            f"; {figures.in_flight} requests in flight ({figures.in_flight_failed} failed), the longest "
            f"{seconds(figures.in_flight_e2e_max_ms) or 'n/m'} end to end"
        )
        if figures.step is not None:
            text += f"; the step's TTFT / E2E P99 {p99s(figures.step)}"
        neighbours = ", ".join(f"{p99s(n)} (step {n.step})" for n in figures.neighbours)
        text += f" vs {neighbours} next to it" if neighbours else ""
    return text + f"; answering again {seconds(row.recover_ms) or 'never'} after it ended"


def probes_section(view: RunView) -> dict | None:
    doc = view.summary.probes
    if doc is None:
        return None
    rows = [
        {
            "variant": r.variant,
            "probe": r.probe,
            "kind": r.kind,
            "sent": r.sent,
            "expected": r.expected,
            "status": r.status,
            "answer": r.answer,
            "error": clip(r.error, MESSAGE_MAX),
            "latency": seconds(r.latency_ms),
            "recover": seconds(r.recover_ms),
            "recovered": r.recovered,
            "verdict": r.verdict,
            "cls": VERDICT_CLASS[r.verdict],
            "note": clip(r.note, MESSAGE_MAX),
        }
        for r in doc.rows
    ]
    faults = [
        {
            "variant": r.variant,
            "probe": r.probe,
            "text": fault_text(r),
            "step": step_text(r.figures.step) if r.figures else None,
            "neighbours": [step_text(n) for n in r.figures.neighbours] if r.figures else [],
            "in_flight": r.figures.in_flight if r.figures else None,
            "failed": r.figures.in_flight_failed if r.figures else None,
            "e2e_max": seconds(r.figures.in_flight_e2e_max_ms) if r.figures else None,
            "ttft_max": seconds(r.figures.in_flight_ttft_max_ms) if r.figures else None,
        }
        for r in doc.rows
        if r.kind == "fault"
    ]
    return {
        "rows": rows,
        "faults": faults,
        "text": doc.text,
        "failed": doc.failed,
        "conditions": view.conditions_line(),
    }


def probe_lines(summary: Summary) -> list[str]:
    """For the console and ``summary.md``: the counts, every probe that was not ok, every fault."""
    doc = summary.probes
    if doc is None:
        return []
    lines = [f"probes: {doc.text}"]
    for r in doc.rows:
        if r.kind == "fault":
            lines.append(f"fault: {fault_text(r)}")
        elif r.verdict != "ok":
            lines.append(
                f"probe {r.probe} on {r.variant}: {r.verdict} ({r.answer or 'no answer'}"
                + (f"; {clip(r.note, MESSAGE_MAX)}" if r.note else "")
                + ")"
            )
    return lines
