"""The run's report: ``report.html`` (self-contained, Jinja2 with autoescape, inline SVG charts), ``steps.csv``,
``summary.md``, ``schedule.json`` after a sweep, and the console tables. It presents a ``ReportInput``
(summary, verdict, run comparison, timeline, env) and never reads a file or computes a figure; no Locust
imports.
"""

from __future__ import annotations

from pathlib import Path

from ..rundir import layout
from .exports import steps_csv, summary_markdown
from .html import render_html, render_verdict, verdict_css
from .view import ReportInput, RunView

__all__ = ["ReportInput", "RunView", "render_verdict", "verdict_css", "write_report"]


def write_report(run_dir: Path, inp: ReportInput) -> Path:
    """Write ``report.html``, ``steps.csv``, ``summary.md`` and (after a sweep) ``schedule.json`` into
    ``run_dir``; return the report's path."""
    view = RunView(inp)
    layout.write_text(Path(run_dir) / layout.STEPS_CSV, steps_csv(inp.summary))
    if inp.summary.schedules:
        # The schedule on its own, for a deployment script: per sweep the ranges and vLLM's form.
        layout.write_json(
            Path(run_dir) / layout.SCHEDULE,
            [
                s.model_dump(mode="json", include={"name", "setting", "label", "ranges", "text", "vllm"})
                for s in inp.summary.schedules
            ],
        )
    layout.write_text(Path(run_dir) / layout.SUMMARY_MD, summary_markdown(view))
    return layout.write_text(Path(run_dir) / layout.REPORT, render_html(view))
