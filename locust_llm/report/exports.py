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
import json
import os
import re
from pathlib import Path

from ..analysis.values import json_safe
from .fmt import num, ok

LEADING = ["variant", "is_baseline", "step", "level", "mode", "users", "window_s", "requests", "errors",
           "error_rate", "output_tokens", "output_tps", "output_tps_ci95_lo", "output_tps_ci95_hi", "request_rate",
           "goodput_rps"]
SKIP_KEYS = {"acceptance", "window", "t_from", "t_to", "positions", "missing", "partial", "gaps", "sources",
             "reasons", "source", "method", "rules"}
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
        for suffix, bound in zip(("lo", "hi"), ci):
            if ok(bound):
                out[f"{name}_{suffix}"] = bound


def step_rows(summary: dict) -> list[dict]:
    """One flat dict per variant x step, baseline first; speed-ups attached to the other variants."""
    baseline = summary.get("baseline")
    comparisons = {c.get("variant"): c for c in summary.get("comparisons") or [] if isinstance(c, dict)}
    variants = summary.get("variants") or {}
    names = sorted(variants, key=lambda n: n != baseline)
    rows = []
    for name in names:
        entry = variants[name] or {}
        comp = comparisons.get(name) or {}
        by_level = {float(s["level"]): s for s in comp.get("steps") or [] if ok(s.get("level"))}
        steps = sorted((s for s in entry.get("steps") or [] if isinstance(s, dict)),
                       key=lambda s: (s.get("step") if ok(s.get("step")) else 0))
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


def steps_csv(summary: dict) -> str:
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
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#!])")


def md(text) -> str:
    """Markdown-safe inline text: no tags, links, emphasis or table breaks from untrusted strings."""
    text = "" if text is None else str(text)
    text = " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _pct(v) -> str:
    return f"{100 * v:.1f}%" if ok(v) else "n/m"


def _x(v) -> str:
    return f"{v:.2f}x" if ok(v) else "n/m"


def _ci_text(ci, fmt) -> str:
    return f"{fmt(ci[0])}-{fmt(ci[1])}" if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(
        ok(c) for c in ci) else ""


def _lvl(v) -> str:
    return f"{float(v):g}" if ok(v) else str(v)


def summary_markdown(summary: dict, env: dict | None = None, run_dir: Path | None = None) -> str:
    """The ticket-sized summary; ``run_dir`` (optional) supplies steps.json's events for the warnings."""
    from .render import Report  # the same conditions line and verdict wording as the HTML report

    env = env or {}
    steps_doc = None if run_dir is not None else {"steps": [], "events": summary.get("events") or []}
    report = Report(Path(run_dir or "."), summary, env=env, steps_doc=steps_doc)
    verdict = report.verdict()
    unit = "req/s" if report.mode == "open" else "users"
    run_id = summary.get("run_id") or env.get("run_id") or "run"
    names = report._ordered_variants()
    lines = [f"## LLM load test {md(run_id)}: {md(' vs '.join(names) or 'no variants')}", ""]
    lines.append("**Verdict**")
    lines.append("")
    for item in verdict["items"]:
        consistency = ""
        if item["defect"]:
            consistency = f"; **consistency defect**: output differs from {md(item['baseline'])}"
        elif item["agreement"]:
            consistency = f"; output identical on {item['identical']}/{item['compared']} greedy prompts"
        ci = f" (95% CI {item['ci'].replace(chr(0x2013), '-').replace(chr(0xd7), 'x')})" if item["ci"] else " (no CI)"
        lines.append(f"- **{md(item['variant'])}** vs {md(item['baseline'])}: "
                     f"{(item['speedup'] or 'n/m').replace(chr(0xd7), 'x')} aggregate output tok/s at "
                     f"{md(item['level'])} {md(item['unit'])}{ci}; {md(item['crossover'])}{consistency}")
        lines.append(f"  - Recommendation: {md(item['recommendation'])}")
    if verdict["note"]:
        lines.append(f"- {md(verdict['note'])}")
    for warning in verdict["warnings"]:
        lines.append(f"- Warning: {md(warning)}")
    lines += ["", f"**Conditions**: {md(report.conditions_line())}", ""]
    comparisons = {c.get("variant"): {float(s["level"]): s for s in c.get("steps") or [] if ok(s.get("level"))}
                   for c in report.comparisons}
    ttft_key = "ttft_sched_ms" if report.mode == "open" else "ttft_ms"
    ttft_name = "TTFT_sched" if report.mode == "open" else "TTFT"
    for name in names:
        entry = report.variants.get(name) or {}
        speed = comparisons.get(name)
        title = f"### {md(name)}" + (" (baseline)" if name == report.baseline else "")
        lines += [title, ""]
        header = [unit, "req", "err", f"{ttft_name} P50/P95 ms", "TPOT P50/P95 ms", "out tok/s (95% CI)",
                  "goodput req/s", "accept. (server)"]
        if speed is not None:
            header.append("speed-up (95% CI)")
        header.append("notes")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---:" if i < len(header) - 1 else "---" for i in range(len(header))) + "|")
        for s in sorted(entry.get("steps") or [], key=lambda s: s.get("level") if ok(s.get("level")) else 0):
            ttft, tpot = s.get(ttft_key) or {}, s.get("tpot_ms") or {}
            acc = ((s.get("acceptance") or {}).get("server") or (s.get("server") or {}).get("acceptance") or {})
            notes = []
            if ok(s.get("level")) and s["level"] == entry.get("saturation_level"):
                notes.append("saturation")
            if ok(s.get("level")) and s["level"] == entry.get("knee_level"):
                notes.append("knee")
            if s.get("steady") is False:
                notes.append("unsteady")
            if s.get("client_valid") is False:
                notes.append("client-invalid")
            ci = _ci_text(s.get("output_tps_ci95"), _fmt)
            cells = [_lvl(s.get("level")), str(s.get("requests", "n/m")),
                     f"{s.get('errors', 0)} ({_pct(s.get('error_rate'))})" if s.get("errors") else "0",
                     f"{_fmt(ttft.get('p50'))} / {_fmt(ttft.get('p95'))}",
                     f"{_fmt(tpot.get('p50'))} / {_fmt(tpot.get('p95'))}",
                     f"{_fmt(s.get('output_tps'))}" + (f" ({ci})" if ci else ""),
                     _fmt(s.get("goodput_rps")), _pct(acc.get("rate"))]
            if speed is not None:
                fig = ((speed.get(float(s["level"])) if ok(s.get("level")) else None) or {}).get(
                    "output_tps_speedup") or {}
                sci = _ci_text(fig.get("ci95"), lambda v: f"{v:.2f}")
                cells.append(_x(fig.get("value")) + (f" ({sci})" if sci else ""))
            cells.append(", ".join(notes))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Full report: report.html (self-contained); every figure: steps.csv, summary.json.")
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_exports(run_dir: Path, summary: dict | None = None, env: dict | None = None) -> list[Path]:
    """Write ``steps.csv`` and ``summary.md`` (and ``summary.json`` if the run directory lacks it)."""
    run_dir = Path(run_dir)
    if summary is None:
        from .render import load_summary

        summary = load_summary(run_dir)
    if env is None:
        path = run_dir / "env.json"
        try:
            env = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            env = {}
    written = [_write(run_dir / "steps.csv", steps_csv(summary)),
               _write(run_dir / "summary.md", summary_markdown(summary, env, run_dir))]
    if not (run_dir / "summary.json").exists():
        written.append(_write(run_dir / "summary.json", json.dumps(json_safe(summary), indent=2)))
    return written


def _fmt(v) -> str:
    """Like the report: three significant digits, "n/m" when not measured."""
    return num(v) or "n/m"
