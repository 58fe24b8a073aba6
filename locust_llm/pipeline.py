"""The one post-run sequence: run directory -> summary.json -> compare.json -> verdict.json -> report and exports.

The headless finish, the web UI's stop, ``locust-llm report`` and ``locust-llm compare`` all call
:func:`finish_run`, so a report always agrees with the files beside it. No Locust imports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .analysis.capacity import capacity_lines
from .analysis.documents.regression import RunComparison
from .analysis.documents.summary import Summary, Verdict
from .analysis.gates import evaluate, gates_of
from .analysis.regression import compare_runs
from .analysis.summary import build_summary
from .analysis.timeline import build_timeline
from .places import BASELINES_ENV, baseline_library
from .report import ReportInput, RunView, write_report
from .report.console import verdict_table
from .rundir import RunData, is_run_dir, layout, load_run
from .scenario import GatesSpec

log = logging.getLogger(__name__)

__all__ = ["Outcome", "finish_run", "gates_of", "missing_baseline"]


@dataclass
class Outcome:
    summary: Summary
    verdict: Verdict
    regression: RunComparison | None
    report: Path | None
    text: str  # the verdict table a headless run prints
    inp: ReportInput  # what the report presents (the web UI shows its verdict cards)


def _regression(
    run: RunData, run_dir: Path, gates: GatesSpec, baseline_dir: Path | None, max_regression_pct: float | None
) -> tuple[RunComparison | None, list[str]]:
    """The comparison this run's verdict includes, and any bad-input reason (a named baseline that is missing)."""
    threshold = gates.max_regression_pct if max_regression_pct is None else max_regression_pct
    if baseline_dir is None and gates.baseline_run:
        missing = missing_baseline(gates)
        if missing:
            return None, [missing]
        baseline_dir = baseline_library(gates.library) / gates.baseline_run
    if baseline_dir is None:
        previous = layout.read_json(run_dir / layout.RUN_COMPARISON)
        old_dir = previous.get("old_dir") if isinstance(previous, dict) else None
        if not old_dir or not is_run_dir(Path(old_dir)):
            return None, []
        baseline_dir = Path(old_dir)
        threshold = previous.get("max_regression_pct", threshold) if max_regression_pct is None else threshold
    return compare_runs(load_run(baseline_dir), run, threshold), []


def missing_baseline(gates: GatesSpec) -> str | None:
    """Why ``gates.baseline_run`` cannot be compared with (no saved run of that name in the library), or None; a run
    asks before its first request, and the verdict again at the end."""
    if not gates.baseline_run:
        return None
    library = baseline_library(gates.library)
    if is_run_dir(library / gates.baseline_run):
        return None
    return (
        f"baseline run {gates.baseline_run!r} not found in {library}/ (save one with `locust-llm baseline save "
        f"RUN_DIR --name {gates.baseline_run}`, or point ${BASELINES_ENV} at the library)"
    )


def finish_run(
    run_dir: Path,
    run: RunData | None = None,
    gates: GatesSpec | None = None,
    baseline_dir: Path | None = None,
    max_regression_pct: float | None = None,
) -> Outcome:
    """Recompute every derived file of ``run_dir`` from its raw files (or from ``run``, e.g. merged runs).

    ``gates`` default to the ones the run recorded; ``baseline_dir`` compares with that run instead of the
    gates' saved baseline (``locust-llm compare``).
    """
    run_dir = Path(run_dir)
    run = run if run is not None else load_run(run_dir)
    gates = gates if gates is not None else gates_of(run.env)
    summary = build_summary(run)
    layout.write_text(run_dir / layout.SUMMARY, summary.model_dump_json(indent=2))
    regression, bad_input = _regression(run, run_dir, gates, baseline_dir, max_regression_pct)
    if regression is not None:
        layout.write_text(run_dir / layout.RUN_COMPARISON, regression.model_dump_json(indent=2))
    verdict = evaluate(summary, gates, regression, bad_input)
    layout.write_text(run_dir / layout.VERDICT, verdict.model_dump_json(indent=2))
    inp = ReportInput(
        summary=summary,
        env=run.env,
        verdict=verdict,
        regression=regression,
        run_name=run_dir.name,
        timeline=build_timeline(run, RunView.variant_order(summary, run.env)),
    )
    report = None
    try:
        report = write_report(run_dir, inp)
    except Exception:  # the measurements and the verdict are on disk; a report bug must not hide them
        log.exception("could not render the HTML report; `locust-llm report %s` retries", run_dir)
    text = "\n".join([verdict_table(summary, verdict), *capacity_lines(summary, gates)])
    return Outcome(summary, verdict, regression, report, text, inp)
