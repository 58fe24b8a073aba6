"""The run's report: ``report.html`` (self-contained, Jinja2 with autoescape, inline SVG charts), ``steps.csv``
and ``summary.md``. Reads the run directory only; no Locust imports.

Entry points: :func:`render_report` (HTML + exports) and :func:`write_exports` (CSV + Markdown only).
"""

from .exports import steps_csv, summary_markdown, write_exports
from .render import render_report

__all__ = ["render_report", "steps_csv", "summary_markdown", "write_exports"]
