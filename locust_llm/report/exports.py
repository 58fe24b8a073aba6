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

from ..analysis.documents.summary import Summary
from ..fmt import ci_text, lvl, md, ok, pct, text, times
from . import sections
from .probes import probe_lines
from .scale_out import scale_out_lines
from .soak import soak_lines
from .splits import split_lines
from .traffic import traffic_lines
from .view import RunView

__all__ = ["steps_csv", "summary_markdown"]

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
    if isinstance(value, bool) or ok(value):
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
            if ok(bound):
                out[f"{name}_{suffix}"] = bound


def step_rows(summary: Summary) -> list[dict]:
    """One flat dict per variant x step, baseline first; speed-ups attached to the other variants."""
    summary = summary.model_dump()
    baseline = summary.get("baseline")
    comparisons = {c.get("variant"): c for c in summary.get("comparisons") or [] if isinstance(c, dict)}
    variants = summary.get("variants") or {}
    names = sorted(variants, key=lambda n: n != baseline)
    rows = []
    for name in names:
        entry = variants[name] or {}
        comp = comparisons.get(name) or {}
        by_level = {float(s["level"]): s for s in comp.get("steps") or [] if ok(s.get("level"))}
        steps = sorted(
            (s for s in entry.get("steps") or [] if isinstance(s, dict)),
            key=lambda s: s.get("step") if ok(s.get("step")) else 0,
        )
        for step in steps:
            row: dict = {"variant": name, "is_baseline": name == baseline, "mode": step.get("mode")}
            flatten({k: v for k, v in step.items() if k != "mode"}, "", row)
            level = step.get("level")
            row["is_saturation"] = ok(level) and level == entry.get("saturation_level")
            row["is_knee"] = ok(level) and level == entry.get("knee_level")
            for key in ("saturation_level", "knee_level"):
                if ok(entry.get(key)):
                    row[f"variant_{key}"] = entry[key]
            if comp:
                row["speedup_vs"] = comp.get("baseline")
                if ok(comp.get("crossover_level")):
                    row["crossover_level"] = comp["crossover_level"]
                match = by_level.get(float(level)) if ok(level) else None
                for key, fig in (match or {}).items():
                    if key.endswith("_speedup") and isinstance(fig, dict):
                        name_ = "speedup_" + key[: -len("_speedup")]
                        if ok(fig.get("value")):
                            row[name_] = fig["value"]
                        _ci(fig.get("ci95"), f"{name_}_ci95", row)
            rows.append(row)
    return rows


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
def summary_markdown(view: RunView) -> str:
    """The ticket-sized summary: the headline cards' words, warnings, conditions, one table per variant."""
    head = sections.headline(view)
    unit = "req/s" if view.mode == "open" else "users"
    lines = [f"## LLM load test {md(view.run_id)}: {md(' vs '.join(view.names) or 'no variants')}", ""]
    lines += ["**Verdict**", ""]
    for item in head["items"]:
        consistency = ""
        if item["defect"]:
            consistency = f"; **consistency defect**: output differs from {md(item['baseline'])}"
        elif item["agreement"]:
            consistency = f"; output identical on {item['identical']}/{item['compared']} greedy prompts"
        ci = f" (95% CI {item['ci']})" if item["ci"] else " (no CI)"
        lines.append(
            f"- **{md(item['variant'])}** vs {md(item['baseline'])}: {item['speedup'] or 'n/m'} aggregate "
            f"output tok/s at {md(item['level'])} {md(item['unit'])}{ci}; {md(item['crossover'])}"
            f"{consistency}"
        )
        levels = [
            f"{md(lv['level'])} {lv['status']}" + (f" {lv['speedup']}" if lv["speedup"] else "")
            for lv in item["levels"]
        ]
        lines.append("  - Levels: " + ", ".join(levels))
        lines.append(f"  - Recommendation: {md(item['recommendation'])}")
    if head["note"]:
        lines.append(f"- {md(head['note'])}")
    for warning in head["warnings"]:
        lines.append(f"- Warning: {md(warning)}")
    for sweep in view.summary.schedules:
        lines.append(f"- Sweep {md(sweep.name)} ({md(sweep.setting)}): schedule {md(sweep.text or 'no level judged')}")
    cost = view.summary.cost
    if cost is not None:
        lines.append(f"- Cost at {md(cost.price.text)}: {md(cost.text)}")
    if view.summary.images is not None:
        lines += [f"- Images: {md(level.text)}" for level in view.summary.images.levels]
    quality = view.summary.quality
    if quality is not None:
        lines.append(f"- Quality ({quality.items} tasks): {md(quality.text)}")
        lines += [f"  - {md(name)}: {md(figures.text)}" for name, figures in quality.variants.items()]
    lines += [f"- {md(line)}" for line in soak_lines(view.summary)]
    lines += [f"- {md(line)}" for line in probe_lines(view.summary)]
    lines += [f"- {md(line)}" for line in scale_out_lines(view.summary)]
    lines += [f"- {md(line)}" for line in split_lines(view.summary)]
    lines += [f"- {md(line)}" for line in traffic_lines(view)]
    verdict = view.inp.verdict
    if verdict is not None:
        lines.append(f"- Exit code {verdict.exit_code}" + ("" if verdict.exit_code else " (every gate holds)"))
    lines += ["", f"**Conditions**: {md(view.conditions_line())}", ""]
    comparisons = {c.variant: {s.level: s for s in c.steps} for c in view.comparisons}
    head = view.summary.headline_ttft  # ttft, or ttfot: the first answer token (load.reasoning.headline_ttft)
    ttft_key, ttft_name = (
        (f"{head}_sched_ms", f"{head.upper()}_sched") if view.mode == "open" else (f"{head}_ms", head.upper())
    )
    for name in view.names:
        entry = view.variants.get(name)
        speed = comparisons.get(name)
        lines += [f"### {md(name)}" + (" (baseline)" if name == view.baseline else ""), ""]
        header = [
            unit,
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
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---:" if i < len(header) - 1 else "---" for i in range(len(header))) + "|")
        for s in view.steps_of(name):
            ttft, tpot = getattr(s, ttft_key), s.tpot_ms
            acc = (s.acceptance.server if s.acceptance else None) or (s.server.acceptance if s.server else None)
            notes = []
            if entry is not None and s.level == entry.saturation_level:
                notes.append("saturation")
            if entry is not None and s.level == entry.knee_level:
                notes.append("knee")
            notes += [md(reason) for reason in s.status_reasons] + ([md(s.anomaly)] if s.anomaly else [])
            ci = ci_text(s.output_tps_ci95, text)
            cells = [
                lvl(s.level),
                s.status,
                str(s.requests),
                f"{s.errors} ({pct(s.error_rate) or 'n/m'})" if s.errors else "0",
                f"{text(ttft.p50 if ttft else None)} / {text(ttft.p95 if ttft else None)}",
                f"{text(tpot.p50 if tpot else None)} / {text(tpot.p95 if tpot else None)}",
                text(s.output_tps) + (f" ({ci})" if ci else ""),
                text(s.goodput_rps),
                (pct(acc.rate) if acc else None) or "n/m",
            ]
            if speed is not None:
                fig = speed[s.level].output_tps_speedup if s.level in speed else None
                sci = ci_text(fig.ci95, lambda v: f"{v:.2f}") if fig else None
                cells.append(((times(fig.value) if fig else None) or "n/m") + (f" ({sci})" if sci else ""))
            cells.append(", ".join(notes))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Full report: report.html (self-contained); every figure: steps.csv, summary.json.")
    return "\n".join(lines) + "\n"
