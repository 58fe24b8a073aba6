"""The report's text sections, each from the ``RunView`` alone: header, gates, comparison with an earlier run,
conditions, consistency, client validity and steadiness, run events (the verdict cards: :mod:`.headline`).
"""

from __future__ import annotations

import json
import time

from ..analysis.errors import MESSAGE_MAX, clip
from ..analysis.gates import EXIT_MEANINGS
from ..fmt import ci_text, is_number, lvl, num, pct, times
from ..rundir.env import ClocksEnv
from ..rundir.events import ConsistencySkipped
from .console import servers_apart
from .prompt_cache import mode_text
from .view import RunView, command_text, flags_text, level_name, unit_of

__all__ = [
    "conditions",
    "consistency",
    "gates",
    "meta",
    "regression",
    "run_events",
    "validity",
]

LOG_TAIL_MAX = 3000


def meta(view: RunView) -> dict:
    t0 = view.inp.timeline.t0
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t0)) if is_number(t0) else None
    return {
        "run_id": view.run_id,
        "title": f"locust-llm report \u2014 {view.run_id}",
        "subtitle": " vs ".join(view.names) if view.names else "no variants recorded",
        "model": view.model_name(),
        "engine": view.engine(),
        "started": start,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "summary_generated": view.summary.generated_at,
        "records": view.summary.records,
        "scenario": view.scenario.name,
        "mode": view.mode,
        "unit": unit_of(view.mode),
        "level_name": level_name(view.mode),
        "conditions": view.conditions_line(),
    }


def gates(view: RunView) -> dict | None:
    """The nightly verdict: exit code, reasons, failed SLO checks."""
    verdict = view.inp.verdict
    if verdict is None:
        return None
    reasons = [f"[{code}] {reason}" for code, items in verdict.reasons.items() for reason in items]
    failed = [
        {"gate": c.gate, "variant": c.variant, "level": lvl(c.level), "value": num(c.value), "limit": num(c.limit)}
        for c in verdict.checks
        if not c.ok
    ]
    return {
        "code": verdict.exit_code,
        "meaning": EXIT_MEANINGS.get(verdict.exit_code, "see docs/verdicts-and-gates.md"),
        "ok": verdict.exit_code == 0,
        "reasons": reasons,
        "failed": failed,
        "checked": len(verdict.checks),
    }


def regression(view: RunView) -> dict | None:
    """The comparison with an earlier run (``compare.json``)."""
    doc = view.inp.regression
    if doc is None:
        return None
    flagged = {(r.variant, r.level, r.metric) for r in doc.regressions}
    rows = [
        {
            "variant": r.variant,
            "level": lvl(r.level),
            "metric": r.metric,
            "ratio": times(r.ratio),
            "ci": ci_text(r.ci95),
            "change": r.change,
            "regression": (r.variant, r.level, r.metric) in flagged,
        }
        for r in doc.rows
    ]
    return {
        "old": doc.old,
        "new": doc.new,
        "threshold": num(doc.max_regression_pct),
        "rows": rows,
        "regressions": len(flagged),
        "prompt_cache": doc.prompt_cache,
    }


def clocks_text(clocks: ClocksEnv | None) -> str | None:
    """Each worker's measured offset from the master's clock, its uncertainty, and a warning beyond the bound."""
    if clocks is None or not clocks.workers:
        return None
    bound = clocks.bound_s or 0.0
    parts = []
    for worker, est in sorted(clocks.workers.items()):
        text = (
            f"worker {worker} {1000 * est.offset_s:+.2f} ms \u00b1 {1000 * est.uncertainty_s:.2f} ms "
            f"(drift {1000 * est.drift_s:.2f} ms, {est.exchanges} exchanges)"
        )
        if est.uncertainty_s > bound:
            text += f" WARNING: uncertain beyond {1000 * bound:g} ms, requests near window edges may be mislabelled"
        parts.append(text)
    return "; ".join(parts)


def priority_text(server_nice, client_nice) -> str | None:
    """A launched server's CPU priority beside the load generator's (None: not launched, or not recorded)."""
    if server_nice is None:
        return None
    text = f"CPU priority: nice {server_nice}"
    return text + (f" (the load processes: {client_nice})" if client_nice is not None else "")


def conditions(view: RunView) -> dict:
    load, env = view.load, view.env
    host, srv, workload = view.host, view.server_spec, view.workload
    ladder = load.ladder
    run_rows = [
        ("run id", view.run_id),
        (
            "scenario",
            (view.scenario.name or "") + (f" ({env.scenario_file})" if env.scenario_file else ""),
        ),
        ("started", meta(view)["started"]),
        ("variants (in order)", ", ".join(view.names) or None),
        ("servers", servers_apart(view.summary)),
        ("baseline", view.baseline),
        ("requests recorded", view.summary.records),
        ("seed", env.seed if "seed" in env.model_fields_set else load.seed),
    ]
    exact = workload.exact
    load_rows = [
        (
            "mode",
            f"{view.mode} loop"
            + (f", {load.arrival} arrivals (burstiness {load.burstiness})" if view.mode == "open" else ""),
        ),
        ("ladder", (", ".join(lvl(x) for x in ladder) + f" {unit_of(view.mode)}") if ladder else None),
        (
            "step duration (steady window)",
            f"{load.step_duration_s:g} s" if is_number(load.step_duration_s) else None,
        ),
        ("warm-up per step (excluded)", f"{load.warmup_s:g} s" if is_number(load.warmup_s) else None),
        ("API", load.api),
        ("prompt length", f"{load.prompt_tokens} tokens" if load.prompt_tokens else None),
        (
            "prompt lengths",
            None
            if exact is None
            else (
                "exact (counted by the server's or a named tokenizer)"
                if exact
                else "approximate (no tokenizer answered)"
            ),
        ),
        ("output length (max_tokens)", f"{load.max_tokens} tokens" if load.max_tokens else None),
        ("ignore EOS", load.ignore_eos),
        ("temperature", load.temperature),
        ("length buckets", json.dumps(load.buckets) if load.buckets else None),
        ("dataset", load.dataset),
        ("prompt cache", mode_text(view) or f"not recorded (unique_prefix: {load.unique_prefix})"),
        ("max in flight (open loop)", load.max_inflight if view.mode == "open" else None),
        (
            "think time",
            f"{load.think_time_s:g} s" if is_number(load.think_time_s) and load.think_time_s else None,
        ),
        ("timeouts", ", ".join(f"{k} {v:g} s" for k, v in (load.timeouts or {}).items() if is_number(v)) or None),
        (
            "SLOs (goodput)",
            ", ".join(f"{k} \u2264 {v:g}" for k, v in view.summary.slo.items() if is_number(v))
            or "none set (goodput = successful requests/s)",
        ),
    ]
    host_rows = [
        ("server host", host.hostname),
        ("platform", host.platform),
        ("CPU", " ".join(str(x) for x in (host.processor, host.machine) if x) or None),
        ("CPU cores", host.cpu_count),
        ("memory", f"{host.memory_total_gib:g} GiB" if is_number(host.memory_total_gib) else None),
        ("GPU", host.gpu),
    ]
    client = view.client
    client_rows = [
        ("client host", host.hostname),
        ("Python", host.python),
        ("load processes", view.options.get("processes") or 1),
        ("load processes' priority", f"nice {client.nice}" if client.nice is not None else None),
        ("worker clocks (aligned to the master's)", clocks_text(env.clocks)),
    ] + [(name, version) for name, version in client.packages.items()]
    servers = []
    for name in view.names:
        server = view.server_of(name)
        servers.append(
            {
                "variant": name,
                "color": view.colors.get(name),
                "baseline": name == view.baseline,
                "engine": server.engine or ("external" if env.external_url else srv.engine),
                "version": server.version.strip() if server.version else None,
                "model": server.model or srv.model,
                "served_model": server.served_model or srv.served_model_name,
                "speculative": flags_text(view.speculative_of(name)),
                "command": command_text(server.command),
                "url": server.url,
                "launched": server.launched,
                "notes": json.dumps(server.notes) if server.notes else None,
                "priority": priority_text(server.nice, client.nice),
            }
        )
    optional = {
        "servers",
        "length buckets",
        "dataset",
        "max in flight (open loop)",
        "think time",
        "load processes' priority",
        "prompt lengths",
    }

    def clean(rows):
        return [(k, v if v not in ("", None) else None) for k, v in rows if v not in ("", None) or k not in optional]

    run_rows += [(f"{check} check", why) for check, why in view.summary.checks_skipped.items()]
    return {
        "groups": [
            ("Run", clean(run_rows)),
            ("Load", clean(load_rows)),
            ("Server host", clean(host_rows)),
            ("Load generator and tool versions", clean(client_rows)),
        ]
        + [detected_rows(name, facts) for name, facts in view.summary.detected.items()],
        "servers": servers,
    }


def detected_rows(name: str, facts) -> tuple[str, list[tuple[str, str | None]]]:
    """What a variant's numbers rest on, and every request the run sent its server (``summary.detected``)."""
    cached = {True: "reported", False: "not reported", None: None}[facts.cached_prompt_tokens]
    listed = "; ".join(f"{e.method} {e.path} {e.count:,} ({e.purpose})" for e in facts.requests)
    return (
        f"What {name}'s numbers rest on",
        [
            ("server", f"{facts.url or ''} ({facts.server})"),
            ("model, API", f"{facts.model or 'not said'}, {facts.api or 'not recorded'}"),
            ("token counts", facts.usage),
            ("cached prompt tokens in the final usage", cached),
            ("speculative-decoding figures", facts.spec_decoding),
            ("/metrics", facts.metrics),
            ("measured streams sent", "; ".join(f"{k} {n:,}" for k, n in facts.streams.items()) or "none"),
            ("other requests of the run", listed or "none"),
            ("the server should count", "; ".join(f"{k} {n:,}" for k, n in facts.accounted.items()) or "none"),
        ],
    )


def consistency(view: RunView) -> dict:
    variants = [
        {
            "variant": name,
            "agreement": pct(figures.agreement, 0),
            "compared": figures.compared,
            "identical": figures.identical,
            "defect": figures.defect,
            "prompts": [p.model_dump() for p in figures.prompts],
        }
        for name, figures in view.summary.consistency.items()
    ]
    skipped = [
        f"{e.variant}: {clip(e.error, MESSAGE_MAX)}" for e in view.summary.events if isinstance(e, ConsistencySkipped)
    ]
    return {"variants": variants, "skipped": skipped, "conditions": view.conditions_line()}


def validity(view: RunView) -> dict:
    rows, steadiness, status = [], [], []
    for name in view.names:
        for s in view.steps_of(name):
            host = s.host
            status.append(
                {
                    "variant": name,
                    "level": lvl(s.level),
                    "step": s.step,
                    "status": s.status,
                    "completed": s.requests - s.errors,
                    "window": num(s.window_s),
                    "foreign": num(host.foreign_cores) if host else None,
                    "steal": num(host.steal_cores) if host else None,
                    "gpu": host.foreign_gpu_processes if host else None,
                    "top": ", ".join(f"{p.name} ({p.pid}) {num(p.cores)}" for p in host.top_foreign) if host else None,
                    "reasons": "; ".join(s.status_reasons + ([s.anomaly] if s.anomaly else [])),
                }
            )
            cv = s.client_validity
            rows.append(
                {
                    "variant": name,
                    "level": lvl(s.level),
                    "valid": s.client_valid,
                    "latency_valid": cv.latency_valid,
                    "cpu": num(cv.cpu_percent_max),
                    "share": pct(cv.client_share),
                    "loop_lag": num(cv.loop_lag_ms_p95),
                    "loop_lag_max": num(cv.loop_lag_ms_max),
                    "sched_lag": num(cv.schedule_lag_ms_p99),
                    "achieved": num(s.achieved_rate),
                    "scheduled": num(s.scheduled_rate),
                    "bounds": bounds_text(cv.bounds),
                    "reasons": "; ".join(cv.reasons + cv.latency_reasons),
                }
            )
            check = s.steady_check
            steadiness.append(
                {
                    "variant": name,
                    "level": lvl(s.level),
                    "steady": s.steady,
                    **{
                        f"{key}_{part}": value
                        for key, fit in (
                            ("thr", check.throughput),
                            ("tpot", check.tpot),
                            ("lat", check.latency),
                            ("inf", check.in_flight),
                        )
                        for part, value in (
                            ("drift", pct(fit.drift_fraction) if fit else None),
                            ("slope", pct(fit.relative_slope_per_min) if fit else None),
                            ("ok", fit.steady if fit else None),
                        )
                    },
                }
            )
    return {
        "rows": rows,
        "steadiness": steadiness,
        "status": status,
        "open_loop": view.mode == "open",
        "conditions": view.conditions_line(),
    }


BOUND_NAMES = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "e2e_ms": "E2E",
    "decode_tps": "decode tok/s",
    "ttft_sched_ms": "TTFT_sched",
    "e2e_sched_ms": "E2E_sched",
    "e2e_sched_all_ms": "E2E_sched (all)",
    "output_tps": "output tok/s",
    "goodput_rps": "goodput",
}


def bounds_text(bounds: dict) -> str | None:
    """How much of each figure the client could account for at most (its worst statistic), marked ones first."""
    if not bounds:
        return None
    parts = []
    for name, b in sorted(bounds.items(), key=lambda item: not item[1].distorted):
        share = "unbounded" if b.worst is None else f"up to {pct(b.worst)}"
        parts.append(f"{BOUND_NAMES.get(name, name)} {share}" + (" (marked)" if b.distorted else ""))
    return "; ".join(parts)


def _since(view: RunView, t) -> str | None:
    t0 = view.inp.timeline.t0
    return f"+{t - t0:.1f} s" if is_number(t) and is_number(t0) else num(t)


def run_events(view: RunView) -> dict:
    rows = []
    for e in view.summary.events:
        # Every kind's own fields as written (a kind this release does not know too); the variant and the log
        # have columns of their own.
        details = e.details()
        variant, log_tail = details.pop("variant", None), details.pop("log_tail", None)
        rows.append(
            {
                "t": _since(view, e.t) or "\u2014",
                "kind": e.kind,
                "variant": variant,
                "details": clip(
                    "; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in details.items()),
                    MESSAGE_MAX * 2,
                ),
                "log_tail": clip(log_tail, LOG_TAIL_MAX) if log_tail else None,
            }
        )
    gaps = []
    missing: dict[tuple[str | None, str | None], dict[str, list[str]]] = {}
    for name in view.names:
        entry = view.variants.get(name)
        if entry is None:
            continue
        for g in entry.telemetry.gaps:
            gaps.append(
                {
                    "variant": name,
                    "source": g.source,
                    "start": _since(view, g.start),
                    "length": f"{g.end - g.start:.1f} s" if is_number(g.start) and is_number(g.end) else "open",
                    "recovered": g.recovered,
                    "error": clip(g.error, MESSAGE_MAX),
                }
            )
        if entry.telemetry.missing:
            missing.setdefault(("all server figures", entry.telemetry.missing), {}).setdefault(name, []).append("all")
        for s in view.steps_of(name):
            for m in s.server.missing if s.server else []:
                missing.setdefault((m.figure, m.reason), {}).setdefault(name, []).append(lvl(s.level))
    grouped: dict[tuple[str | None, str], list[str]] = {}
    for (figure, reason), where in missing.items():
        scope = "; ".join(f"{n} @ {', '.join(levels)}" for n, levels in where.items())
        grouped.setdefault((reason, scope), []).append(str(figure))
    missing_rows = [
        {"figures": ", ".join(figures), "reason": reason, "where": scope}
        for (reason, scope), figures in grouped.items()
    ]
    errors = [
        {
            "variant": e.variant,
            "class": e.error_class,
            "count": e.count,
            "steady": e.steady,
            "levels": ", ".join(lvl(x) for x in e.levels),
            "status": ", ".join(str(x) for x in e.http_status) or None,
            "message": e.message,
        }
        for e in view.summary.errors
    ]
    timeline = view.inp.timeline
    return {
        "events": rows,
        "gaps": gaps,
        "missing": missing_rows,
        "notes": [clip(n, MESSAGE_MAX) for n in timeline.source_notes],
        "telemetry_file": timeline.has_telemetry,
        "errors": errors,
    }
