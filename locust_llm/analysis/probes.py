"""The probe table (``summary.json`` ``probes``): every probe and fault of the run (``probes.json``), and for each
fault what the requests around it saw. Pure.

A fault's step is ``fault-injected`` (``status``): its figures are shown, never used for a verdict. Beside them,
the requests in flight during the fault (sent before it ended, done after it began: each of them waited out a
pause or lost its server, and those refused meanwhile) and the variant's neighbouring steps, so the fault's cost
can be read at a glance.
"""

from __future__ import annotations

import math

import pandas as pd

from ..rundir.load import RunData
from ..rundir.probes import VERDICTS, ProbeResult
from .documents.probes import FaultFigures, ProbeRow, ProbeSummary, StepLatency

__all__ = [
    "fault_text",
    "probe_summary",
]


def fault_text(fault: dict) -> str:
    """A fault recorded on a step (``steps.json``), in words."""
    length = (fault.get("t_end") or math.nan) - (fault.get("t_start") or math.nan)
    seconds = f"{length:.1f} s" if math.isfinite(length) else "an unknown time"
    if fault.get("kind") == "pause":
        return f"server paused for {seconds} (SIGSTOP, then SIGCONT) in the steady window"
    return f"server restarted in the steady window (down {seconds})"


def step_latency(step: dict) -> StepLatency:
    ttft, e2e = (
        ("ttft_sched_all_ms", "e2e_sched_all_ms") if step.get("mode") == "open" else ("ttft_all_ms", "e2e_all_ms")
    )
    return StepLatency(
        step=step["step"],
        level=step["level"],
        status=step.get("status", ""),
        requests=step.get("requests", 0),
        errors=step.get("errors", 0),
        ttft_p99_ms=(step.get(ttft) or {}).get("p99"),
        e2e_p99_ms=(step.get(e2e) or {}).get("p99"),
    )


def max_ms(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.max() * 1e3) if len(values) else None


def fault_figures(run: RunData, steps: list[dict], row: ProbeResult) -> FaultFigures:
    frame = run.requests
    figures = FaultFigures()
    order = sorted(steps, key=lambda s: s["step"])
    at = next((i for i, s in enumerate(order) if s["step"] == row.step), None)
    if at is not None:
        figures.step = step_latency(order[at])
        figures.neighbours = [step_latency(s) for s in order[max(at - 1, 0) : at] + order[at + 1 : at + 2]]
    if len(frame) and row.t_start is not None and row.t_end is not None:
        mine = frame[frame["variant"] == row.variant]
        done = mine["t_done"].fillna(mine["t_end"])
        began = mine["t_send"].fillna(done)  # a request refused before it was sent began and ended at once
        during = mine[(began < row.t_end) & (done >= row.t_start)]
        figures.in_flight = int(len(during))
        figures.in_flight_failed = int(during["error_class"].notna().sum())
        figures.in_flight_e2e_max_ms = max_ms(done[during.index] - during["t_send"])
        figures.in_flight_ttft_max_ms = max_ms(during["t_first"] - during["t_send"])
    return figures


def probe_summary(run: RunData, variants: dict[str, dict]) -> dict | None:
    """The probe table of a run (None when it sent no probe and injected no fault)."""
    if not run.probes:
        return None
    rows = []
    for row in run.probes:
        figures = (
            fault_figures(run, (variants.get(row.variant) or {}).get("steps", []), row) if row.kind == "fault" else None
        )
        rows.append(ProbeRow(**row.model_dump(), figures=figures))
    counts = {verdict: sum(r.verdict == verdict for r in rows) for verdict in VERDICTS}
    failed = list(dict.fromkeys(r.variant for r in rows if r.verdict == "server-failed"))
    text = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n) + f" of {len(rows)} probes and faults"
    if failed:
        text += f"; the server of {', '.join(failed)} crashed or stopped answering"
    return ProbeSummary(rows=rows, counts=counts, failed=failed, text=text).model_dump(mode="json")
