"""Exports beside ``report.html``: ``steps.csv`` (every figure, one row per variant x level) and ``summary.md``.

``steps.csv`` flattens each step of ``summary.json`` with ``_`` between keys: ``ttft_ms_p95``,
``ttft_ms_p95_ci95_lo``, ``output_tps``, ``output_tps_ci95_lo`` / ``_hi``, ``errors_by_class_http_error``,
``server_acceptance_rate``, ``steady_check_tpot_drift_fraction``, ... Non-baseline variants also get the
comparison with the baseline at that level: ``speedup_output_tps``, ``speedup_output_tps_ci95_lo``, ... and the
variant's ``crossover_level``. Floats are written with ``repr`` so they read back bit for bit. Columns are the
union over rows (blank where a figure is absent); the ``acceptance`` block is left out because it repeats
``server_acceptance_*``, ``acceptance_client_*`` and ``tokens_per_chunk_*`` verbatim, and so are clock
timestamps (``window``, ``t_from``, ``t_to``), which are not figures.

``summary.md`` is short and pastes into a ticket: verdict lines, warnings, the conditions line, and one
compact table per variant. Strings from the scenario or server are escaped for Markdown.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from ..analysis.documents.speedup import Ratio
from ..analysis.documents.summary import StepComparison, Summary
from ..fmt import ci_text, is_number, lvl, pct, text, times
from .headline import headline
from .html import environment
from .probes import probe_lines
from .scale_out import scale_out_lines
from .soak import soak_lines
from .splits import split_lines
from .traffic import traffic_lines
from .view import RunView

__all__ = ["MarkdownRow", "MarkdownTable", "markdown_table", "step_rows", "steps_csv", "summary_markdown"]

LEADING = [
    "variant",
    "is_baseline",
    "step",
    "level",
    "mode",
    "users",
    "window_s",
    "requests",
    "errors",
    "error_rate",
    "output_tokens",
    "output_tps",
    "output_tps_ci95_lo",
    "output_tps_ci95_hi",
    "request_rate",
    "goodput_rps",
]
SKIP_KEYS = {
    "acceptance",
    "window",
    "t_from",
    "t_to",
    "positions",
    "missing",
    "partial",
    "gaps",
    "sources",
    "reasons",
    "source",
    "method",
    "rules",
}
STRING_COLUMNS = {"variant", "mode"}


def flatten(value, prefix: str, out: dict) -> None:
    """Numeric and boolean leaves of ``value`` into ``out`` under ``prefix_key_subkey`` names."""
    if isinstance(value, bool) or is_number(value):
        out[prefix] = value
    elif isinstance(value, dict):
        for key, sub in value.items():
            key = str(key)
            if key in SKIP_KEYS:
                continue
            name = f"{prefix}_{key}" if prefix else key
            if key == "ci95" and isinstance(sub, dict):  # {p50: [lo, hi], ...} of a percentile summary
                for stat, ci in sub.items():
                    _ci(ci, f"{prefix}_{stat}_ci95", out)
            elif key == "ci95" or key.endswith("_ci95"):  # [lo, hi]
                _ci(sub, name, out)
            else:
                flatten(sub, name, out)
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            flatten(sub, f"{prefix}_{i}", out)


def _ci(ci, name: str, out: dict) -> None:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        for suffix, bound in zip(("lo", "hi"), ci, strict=False):
            if is_number(bound):
                out[f"{name}_{suffix}"] = bound


def step_rows(summary: Summary) -> list[dict]:
    """One flat dict per variant x step, baseline first; speed-ups attached to the other variants."""
    comparisons = {c.variant: c for c in summary.comparisons}
    rows = []
    for name in sorted(summary.variants, key=lambda n: n != summary.baseline):
        entry = summary.variants[name]
        comp = comparisons.get(name)
        by_level = {float(s.level): s for s in comp.steps if is_number(s.level)} if comp else {}
        for step in sorted(entry.steps, key=lambda s: s.step if is_number(s.step) else 0):
            row: dict = {"variant": name, "is_baseline": name == summary.baseline, "mode": step.mode}
            flatten(step.model_dump(exclude={"mode"}), "", row)
            row["is_saturation"] = is_number(step.level) and step.level == entry.saturation_level
            row["is_knee"] = is_number(step.level) and step.level == entry.knee_level
            for key, level in (("saturation_level", entry.saturation_level), ("knee_level", entry.knee_level)):
                if is_number(level):
                    row[f"variant_{key}"] = level
            if comp is not None:
                row["speedup_vs"] = comp.baseline
                if is_number(comp.crossover_level):
                    row["crossover_level"] = comp.crossover_level
                match = by_level.get(float(step.level)) if is_number(step.level) else None
                if match is not None:
                    _speedups(match, row)
            rows.append(row)
    return rows


def _speedups(step: StepComparison, row: dict) -> None:
    """Every speed-up of a compared level, in the order of the document's fields: ``speedup_<figure>`` and its CI."""
    for key in type(step).model_fields:
        fig = getattr(step, key)
        if key.endswith("_speedup") and isinstance(fig, Ratio):
            name = "speedup_" + key[: -len("_speedup")]
            if is_number(fig.value):
                row[name] = fig.value
            _ci(fig.ci95, f"{name}_ci95", row)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def steps_csv(summary: Summary) -> str:
    rows = step_rows(summary)
    columns = list(LEADING)
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buffer.getvalue()


# -- summary.md ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class MarkdownRow:
    """One step in a variant's table of ``summary.md``, each cell as plain text (``n/m``: not measured);
    ``speedup`` is None in the baseline's table, ``notes`` are escaped by the template."""

    level: str
    status: str
    requests: str
    errors: str
    ttft: str
    tpot: str
    output_tps: str
    goodput: str
    acceptance: str
    speedup: str | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class MarkdownTable:
    """A variant's ladder in ``summary.md``."""

    name: str
    baseline: bool
    header: tuple[str, ...]
    rows: tuple[MarkdownRow, ...]


def summary_markdown(view: RunView) -> str:
    """The ticket-sized summary: the headline cards' words, warnings, conditions, one table per variant."""
    summary = view.summary
    lines = [
        *soak_lines(summary),
        *probe_lines(summary),
        *scale_out_lines(summary),
        *split_lines(summary),
        *traffic_lines(view),
    ]
    return (
        environment(autoescape=False)
        .get_template("summary.md.j2")
        .render(
            view=view,
            summary=summary,
            headline=headline(view),
            lines=lines,
            verdict=view.inp.verdict,
            tables=[markdown_table(view, name) for name in view.names],
        )
    )


def markdown_table(view: RunView, name: str) -> MarkdownTable:
    """A variant's steps: status, latency percentiles of the headline TTFT and of TPOT, throughput with its CI,
    goodput, the server's acceptance, the speed-up over the baseline (compared variants), saturation, knee and
    the status's reasons."""
    head = view.summary.headline_ttft  # ttft, or ttfot: the first answer token (load.reasoning.headline_ttft)
    ttft_key, ttft_name = (
        (f"{head}_sched_ms", f"{head.upper()}_sched") if view.mode == "open" else (f"{head}_ms", head.upper())
    )
    speed = {c.variant: {s.level: s for s in c.steps} for c in view.comparisons}.get(name)
    header = [
        "req/s" if view.mode == "open" else "users",
        "status",
        "req",
        "err",
        f"{ttft_name} P50/P95 ms",
        "TPOT P50/P95 ms",
        "out tok/s (95% CI)",
        "goodput req/s",
        "accept. (server)",
    ]
    if speed is not None:
        header.append("speed-up (95% CI)")
    header.append("notes")
    entry = view.variants.get(name)
    rows = []
    for s in view.steps_of(name):
        ttft, tpot = getattr(s, ttft_key), s.tpot_ms
        acc = (s.acceptance.server if s.acceptance else None) or (s.server.acceptance if s.server else None)
        notes = []
        if entry is not None and s.level == entry.saturation_level:
            notes.append("saturation")
        if entry is not None and s.level == entry.knee_level:
            notes.append("knee")
        notes += s.status_reasons + ([s.anomaly] if s.anomaly else [])
        ci = ci_text(s.output_tps_ci95, text)
        speedup = None
        if speed is not None:
            fig = speed[s.level].output_tps_speedup if s.level in speed else None
            sci = ci_text(fig.ci95, lambda v: f"{v:.2f}") if fig else None
            speedup = ((times(fig.value) if fig else None) or "n/m") + (f" ({sci})" if sci else "")
        rows.append(
            MarkdownRow(
                level=lvl(s.level),
                status=s.status,
                requests=str(s.requests),
                errors=f"{s.errors} ({pct(s.error_rate) or 'n/m'})" if s.errors else "0",
                ttft=f"{text(ttft.p50 if ttft else None)} / {text(ttft.p95 if ttft else None)}",
                tpot=f"{text(tpot.p50 if tpot else None)} / {text(tpot.p95 if tpot else None)}",
                output_tps=text(s.output_tps) + (f" ({ci})" if ci else ""),
                goodput=text(s.goodput_rps),
                acceptance=(pct(acc.rate) if acc else None) or "n/m",
                speedup=speedup,
                notes=tuple(notes),
            )
        )
    return MarkdownTable(name, name == view.baseline, tuple(header), tuple(rows))
