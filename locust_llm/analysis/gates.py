"""The verdict of a run for nightly jobs: SLO gates, regression, validity, server health -> one exit code. Pure.

Exit codes (most severe first when several apply):
  0 all good; 2 bad input (scenario or options); 6 a server failed to start or died during the run;
  5 invalid run (records lost, a step with no request in its steady window, every step of a variant
  had the client as its bottleneck, or no request succeeded); 4 regression beyond the threshold against
  the baseline run; 3 an SLO gate failed.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_SLO = 3
EXIT_REGRESSION = 4
EXIT_INVALID = 5
EXIT_SERVER = 6
SERVER_EVENTS = ("server_start_failed", "server_exited")
INVALID_EVENTS = ("records_missing", "drain_timeout")


@dataclass(frozen=True)
class Gates:
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    error_rate: float | None = None


def slo_checks(summary: dict, gates: Gates) -> list[dict]:
    checks = []
    limits = (("ttft_p99_ms", "ttft_ms", "p99"), ("tpot_p99_ms", "tpot_ms", "p99"), ("error_rate", "error_rate", None))
    for variant, entry in summary.get("variants", {}).items():
        for step in entry.get("steps", []):
            for gate, field, key in limits:
                limit = getattr(gates, gate)
                if limit is None:
                    continue
                value = step.get(field)
                value = (value or {}).get(key) if key else value
                checks.append({"gate": gate, "variant": variant, "level": step.get("level"), "value": value,
                               "limit": limit, "ok": value is not None and value <= limit})
    return checks


def verdict(summary: dict, gates: Gates, regression: dict | None = None) -> dict:
    """``{"exit_code", "reasons", "checks"}`` for a summary.json (and a regression result, if compared)."""
    reasons: dict[int, list[str]] = {}
    for event in summary.get("events", []):
        if event.get("kind") in SERVER_EVENTS:
            reasons.setdefault(EXIT_SERVER, []).append(f"{event['kind']}: variant {event.get('variant')}")
        elif event.get("kind") in INVALID_EVENTS:
            reasons.setdefault(EXIT_INVALID, []).append(f"{event['kind']}: {event.get('missing')}")
    succeeded = 0
    for variant, entry in summary.get("variants", {}).items():
        steps = entry.get("steps", [])
        succeeded += sum(s.get("requests", 0) - s.get("errors", 0) for s in steps)
        for s in steps:
            if not s.get("requests"):
                reasons.setdefault(EXIT_INVALID, []).append(
                    f"no request was sent in the steady window of {variant} @ {s.get('level', 0):g}: "
                    "make the steps longer than a request takes")
        if steps and all(s.get("client_valid") is False for s in steps):
            reasons.setdefault(EXIT_INVALID, []).append(f"the client was the bottleneck at every level of {variant}")
    if summary.get("variants") and succeeded == 0:
        reasons.setdefault(EXIT_INVALID, []).append("no request succeeded")
    if regression and regression.get("regressions"):
        for row in regression["regressions"]:
            reasons.setdefault(EXIT_REGRESSION, []).append(
                f"{row['variant']} @ {row['level']:g}: {row['metric']} x{row['ratio']:.3f} (CI {row['ci95'][0]:.3f}"
                f"-{row['ci95'][1]:.3f}) vs {regression.get('old')}")
    checks = slo_checks(summary, gates)
    for check in checks:
        if not check["ok"]:
            value = "not measured" if check["value"] is None else f"{check['value']:.4g}"
            reasons.setdefault(EXIT_SLO, []).append(f"{check['variant']} @ {check['level']:g}: {check['gate']} "
                                                    f"{value} > {check['limit']:g}")
    code = next((c for c in (EXIT_SERVER, EXIT_INVALID, EXIT_REGRESSION, EXIT_SLO) if c in reasons), EXIT_OK)
    return {"exit_code": code, "reasons": {str(k): v for k, v in sorted(reasons.items())}, "checks": checks}


def format_verdict(summary: dict, result: dict) -> str:
    """The compact table a headless run prints at its end."""
    lines = [f"locust-llm verdict for run {summary.get('run_id')}: exit code {result['exit_code']}"]
    lines.append(f"{'variant':<16} {'level':>6} {'req':>6} {'err%':>6} {'TTFT p50':>9} {'TPOT p50':>9} "
                 f"{'out tok/s':>10} {'steady':>7} {'client':>7}")
    for variant, entry in summary.get("variants", {}).items():
        for s in entry.get("steps", []):
            err = f"{100 * s['error_rate']:.1f}" if s.get("error_rate") is not None else "-"
            ttft = (s.get("ttft_ms") or {}).get("p50")
            tpot = (s.get("tpot_ms") or {}).get("p50")
            tps = s.get("output_tps")
            lines.append(f"{variant:<16} {s.get('level', 0):>6g} {s.get('requests', 0):>6} {err:>6} "
                         f"{_ms(ttft):>9} {_ms(tpot):>9} {(f'{tps:.1f}' if tps else '-'):>10} "
                         f"{_flag(s.get('steady')):>7} {_flag(s.get('client_valid')):>7}")
    for comparison in summary.get("comparisons", []):
        lines.append(f"{comparison['variant']} vs {comparison['baseline']}: crossover "
                     f"{comparison['crossover_level'] if comparison['crossover_level'] is not None else 'none'}; "
                     f"{comparison['recommendation']}")
    for code, why in result["reasons"].items():
        lines += [f"[exit {code}] {reason}" for reason in why]
    return "\n".join(lines)


def _ms(value) -> str:
    return f"{value:.1f}ms" if value is not None else "-"


def _flag(value) -> str:
    return {True: "yes", False: "NO", None: "?"}[value]
