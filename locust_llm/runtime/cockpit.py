"""What the web UI's LLM tab shows, from the experiment in progress (or the last one): where the plan is, a
point per variant and level as steps complete, the last minute of requests, the server's own acceptance and
KV-cache use, warnings as they happen, and once the run has ended its verdict and files.

Live figures are the recorder's running ones (``live.LiveStats``); the verdict is the report's own.
"""

from __future__ import annotations

import math
import stat
from pathlib import Path

import pandas as pd

from ..analysis.gates import EXIT_MEANINGS
from ..analysis.status import busy_text, host_load
from ..analysis.validity import CPU_PERCENT_MAX, LOOP_LAG_MS_MAX
from ..records import now
from ..report import RunView, render_verdict
from ..report.charts import variant_colors
from ..rundir.events import Event

__all__ = ["HOST_WINDOW_S", "live_view", "run_files", "verdict_view"]

HOST_WINDOW_S = 5.0  # the host is judged busy on its last few samples, as a step is on its whole window


def live_view(experiment) -> dict:
    if experiment is None:
        return {"run_id": None}
    _watch(experiment)
    plan = experiment.plan
    live = experiment.recorder.live
    telemetry = getattr(experiment.session, "telemetry", None)
    return {
        "run_id": plan.run_id,
        "scenario": str(plan.scenario.source),
        "engine": plan.engine,
        "variants": plan.variants,
        "baseline": plan.variants[0],
        "mode": plan.load.mode,
        "colors": variant_colors(plan.variants, plan.variants[0]),
        "ladder": plan.load.ladder,
        "progress": experiment.progress(),
        "points": _points(experiment),
        "recent": live.recent_series(),
        "acceptance": {v: _client_acceptance(live, v) for v in plan.variants},
        "telemetry": {v: telemetry.live_figures(v) for v in plan.variants} if telemetry is not None else {},
        "warnings": sorted(experiment.warnings + _event_warnings(experiment.run.events), key=lambda w: w["t"]),
        "outcome": experiment.outcome is not None,
    }


def _points(experiment) -> list[dict]:
    """One point per variant and level measured so far; done once none of its steps is still running."""
    windows: dict[tuple[str, float], list[tuple[float, float]]] = {}
    running: set[tuple[str, float]] = set()
    for row in experiment.run.steps:
        key = (row.variant, row.level)
        windows.setdefault(key, [])
        if math.isnan(row.t_end):
            running.add(key)
        if math.isfinite(row.t_steady):
            windows[key].append((row.t_steady, row.t_end if math.isfinite(row.t_end) else now()))
    batches: dict[tuple[str, float], list] = {}
    for row in experiment.run.steps:
        if (row.variant, row.step) in experiment.throughput:
            batches.setdefault((row.variant, row.level), []).append(experiment.throughput[(row.variant, row.step)])
    return [
        experiment.recorder.live.point(
            variant, level, spans, done=(variant, level) not in running, batches=batches.get((variant, level), [])
        )
        for (variant, level), spans in windows.items()
    ]


def _client_acceptance(live, variant: str) -> float | None:
    drafted = sum(f.drafted for (v, _), f in live.levels.items() if v == variant)
    accepted = sum(f.accepted for (v, _), f in live.levels.items() if v == variant)
    return accepted / drafted if drafted else None


def _watch(experiment) -> None:
    """Host contention and an overloaded load generator become warnings once per step, when first seen."""
    step = experiment.state.step
    samples = experiment.host.samples[-int(HOST_WINDOW_S) * 2 :]
    host = host_load(pd.DataFrame(samples), now() - HOST_WINDOW_S, now()) if samples else None
    limit = experiment.plan.load.contention_cores
    if host is not None and (host["foreign_cores"] + host["steal_cores"] > limit or host["foreign_gpu_processes"]):
        experiment.warn(
            "host_contended",
            f"host busy: {busy_text(host)} (limit {limit:g} cores); this step will be marked contended if it lasts",
            key=step,
        )
    if not experiment.recorder.live.client_ok():
        experiment.warn(
            "client_overloaded",
            f"the load generator is busy: CPU above {CPU_PERCENT_MAX:g}% of a core (the step's throughput would not "
            f"count) or event-loop lag above {LOOP_LAG_MS_MAX:g} ms (its latency figures would be marked)",
            key=step,
        )


def _event_warnings(events: list[Event]) -> list[dict]:
    """Run events (server exited, records lost, sweep stopped, ...) in words: the kind and its plain details."""
    out = []
    for event in events:
        details = ", ".join(
            f"{k.replace('_', ' ')} {v}"
            for k, v in event.details().items()
            if k != "log_tail" and isinstance(v, (str, int, float))
        )
        out.append(
            {
                "t": event.t,
                "kind": event.kind,
                "text": event.kind.replace("_", " ") + (f": {details}" if details else ""),
            }
        )
    return out


def run_files(run_dir: Path) -> list[str]:
    """The run directory's files the web UI links to: finished regular files only (no parts, no temporary or hidden
    files such as the lock, no symbolic links, FIFOs or devices, whatever someone put there)."""
    if not run_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in run_dir.iterdir()
        if stat.S_ISREG(p.lstat().st_mode) and not p.name.endswith(".tmp") and not p.name.startswith(".")
    )


def verdict_view(experiment) -> dict | None:
    """The ended run's verdict: the report's cards (HTML, escaped by the report's templates), the exit code a
    headless run would have, its reasons, and the files; None while no run has ended."""
    outcome = experiment.outcome if experiment is not None else None
    if outcome is None:
        return None
    code = outcome.verdict.exit_code
    return {
        "run_id": experiment.plan.run_id,
        "html": render_verdict(RunView(outcome.inp)),
        "exit_code": code,
        "meaning": EXIT_MEANINGS.get(code, ""),
        "reasons": outcome.verdict.reasons,
        "report": outcome.report is not None,
        "run_dir": str(experiment.run.path),
        "files": run_files(experiment.run.path),
    }
