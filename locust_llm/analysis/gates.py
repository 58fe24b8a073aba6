"""The run's verdict for nightly jobs: SLO gates, regression, validity, server health -> one exit code. Pure.

The exit codes are the ``EXIT_*`` constants below, their meanings ``EXIT_MEANINGS`` (shown by the report and the
web UI), the most severe first when several apply (``SEVERITY``); docs/verdicts-and-gates.md ("Nightly gates and
exit codes") says in full when each applies, in a table ``tests/unit/test_docs.py`` checks against these.

SLO gates judge every step except the contended ones: their latencies say more about the other jobs on the
machine than about the server. (A client-invalid step is still judged: in an open loop a late client's lag is
part of what users would have seen.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..fmt import lvl
from ..rundir.env import RunEnv
from ..rundir.events import (
    ClientRefused,
    DrainTimeout,
    Event,
    Interrupted,
    ProbeServerFailed,
    RecordsLost,
    RecordsMissing,
    ScaleOutFailed,
    ServerExited,
    ServerRestartFailed,
    ServerStartFailed,
    Unfinished,
    WorkerLost,
)
from ..scenario import GatesSpec
from .documents.regression import RunComparison
from .documents.summary import GateCheck, Summary, Verdict

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_MEANINGS",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_SERVER",
    "EXIT_SLO",
    "evaluate",
    "gates_of",
    "slo_checks",
]

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_SLO = 3
EXIT_REGRESSION = 4
EXIT_INVALID = 5
EXIT_SERVER = 6
EXIT_INTERRUPTED = 7
EXIT_MEANINGS = {
    EXIT_OK: "all gates hold",
    EXIT_BAD_INPUT: "bad input",
    EXIT_SLO: "an SLO or quality gate failed",
    EXIT_REGRESSION: "regression beyond the threshold",
    EXIT_INVALID: "invalid run",
    EXIT_SERVER: "a server failed",
    EXIT_INTERRUPTED: "interrupted (SIGTERM or Ctrl-C), or not finished",
}
SEVERITY = (EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_SERVER, EXIT_INVALID, EXIT_REGRESSION, EXIT_SLO)
SERVER_EVENTS = (ServerStartFailed, ServerExited, ProbeServerFailed, ServerRestartFailed, ScaleOutFailed)
# A fault injected on purpose, a level not held, or a busy host says nothing about the server's normal latency.
UNJUDGED = ("fault-injected", "worker-lost", "contended")
# The run, the machine or the server's own accounting may have made these numbers.
UNTRUSTED = ("worker-lost", "suspect-usage", "failed-fast", "contended", "client-invalid")
INVALID_EVENTS = (RecordsMissing, RecordsLost, DrainTimeout)
# gate -> (step figure per mode, percentile key or None). Gates judge every request, failures included (at the time
# they failed); in an open loop TTFT runs from the intended send time.
SLO_GATES = {
    "ttft_p99_ms": ({"closed": "ttft_all_ms", "open": "ttft_sched_all_ms"}, "p99"),
    # the first answer token, after any reasoning; a request that gave no answer counts at the time it ended
    "ttfot_p99_ms": ({"closed": "ttfot_all_ms", "open": "ttfot_sched_all_ms"}, "p99"),
    "tpot_p99_ms": ({"closed": "tpot_all_ms", "open": "tpot_all_ms"}, "p99"),
    "error_rate": ({"closed": "error_rate", "open": "error_rate"}, None),
}


def gates_of(env: RunEnv) -> GatesSpec:
    """The gates a run was judged by: as the run recorded them (scenario plus command-line overrides)."""
    recorded = env.gates or env.recorded_scenario.gates or {}
    return GatesSpec.model_validate(recorded)


def slo_checks(summary: Summary, gates: GatesSpec) -> list[GateCheck]:
    checks = []
    for variant, entry in summary.variants.items():
        for step in entry.steps:
            if step.status in UNJUDGED:
                continue
            for gate, (figures, key) in SLO_GATES.items():
                limit = getattr(gates, gate)
                if limit is None:
                    continue
                value = getattr(step, figures.get(step.mode, figures["closed"]))
                if key is not None:
                    value = getattr(value, key) if value is not None else None
                checks.append(
                    GateCheck(
                        gate=gate,
                        variant=variant,
                        level=step.level,
                        context=step.context,
                        value=value,
                        limit=limit,
                        ok=value is not None and value <= limit,
                    )
                )
    return checks


def _why(steps) -> str:
    return "; ".join(f"{lvl(s.level)}: {s.status_reasons[0] if s.status_reasons else s.status}" for s in steps)


def unclean(summary: Summary) -> list[str]:
    """What leaves the run without a verdict: a comparison with no level measured cleanly on both sides, or
    (without comparisons) a variant whose every step was untrusted (worker-lost, suspect-usage, failed-fast,
    contended or client-invalid); each with the steps' reasons (the host's top processes when it was busy)."""
    problems = []
    for comp in summary.comparisons:
        if comp.steps and not any(s.status in ("clean", "inconclusive") for s in comp.steps):
            reasons = "; ".join(dict.fromkeys(comp_reason for s in comp.steps for comp_reason in s.excluded[:1]))
            problems.append(f"no level of {comp.variant} vs {comp.baseline} was measured cleanly: {reasons}")
    if not summary.comparisons:
        for variant, entry in summary.variants.items():
            if entry.steps and all(s.status in UNTRUSTED for s in entry.steps):
                problems.append(
                    f"no step of {variant} was measured on a quiet host by a capable client from a server that "
                    f"answered and counted honestly: {_why(entry.steps)}"
                )
    for scaling in summary.scale_out.variants if summary.scale_out is not None else []:
        if scaling.slope is None:
            problems.append(f"scale-out: {scaling.text}")
    return problems


def scale_out_checks(summary: Summary) -> list[GateCheck]:
    """``scale_out.min_efficiency``: fails when the efficiency's whole CI lies below it; without an interval (no
    clean pair: the run is invalid anyway) it is not judged and holds."""
    scale = summary.scale_out
    if scale is None or scale.min_efficiency is None:
        return []
    return [
        GateCheck(
            gate="scale_out_min_efficiency",
            variant=v.variant,
            level=v.server_level,
            value=v.efficiency,
            limit=scale.min_efficiency,
            ok=v.efficiency_ci95 is None or v.efficiency_ci95[1] >= scale.min_efficiency,
        )
        for v in scale.variants
    ]


def _event_reasons(events: Sequence[Event], reasons: dict[int, list[str]]) -> None:
    """Adds to ``reasons`` what the run's events say: an interruption, a server fault, a refused client, a lost
    worker or another event that invalidates the run. An event of a kind this release does not know says nothing."""
    for event in events:
        if isinstance(event, Interrupted):
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(event.t)) if event.t else "?"
            reasons.setdefault(EXIT_INTERRUPTED, []).append(
                f"interrupted by {event.signal} at {when} during {event.variant} step "
                f"{event.step}{f' ({event.cut})' if event.cut else ''}: the figures cover what was measured until then"
            )
        elif isinstance(event, Unfinished):
            reasons.setdefault(EXIT_INTERRUPTED, []).append(
                f"the run did not finish (it is still running, or was killed): {event.variant} step(s) "
                f"{event.steps} end at the last record; the figures cover what was recorded until then"
            )
        elif isinstance(event, SERVER_EVENTS):
            reasons.setdefault(EXIT_SERVER, []).append(
                f"{event.kind}: variant {event.variant}"
                + (
                    f" at probe {event.probe}: {event.reason}"
                    if isinstance(event, ProbeServerFailed) and event.probe
                    else ""
                )
            )
        elif isinstance(event, ClientRefused):
            reasons.setdefault(EXIT_BAD_INPUT, []).append(
                f"load process {event.worker} could not build a request, so none was sent and the run "
                f"stopped: {event.message}"
            )
        elif isinstance(event, WorkerLost) and event.stopped:
            reasons.setdefault(EXIT_INVALID, []).append(
                f"load process {event.worker} lost during {event.variant} step {event.step} "
                f"(it had sent {event.records_sent} records; {event.requests_lost} requests in "
                "flight or not yet shipped are lost): the run stopped (load.on_worker_loss: stop)"
            )
        elif isinstance(event, INVALID_EVENTS):
            reasons.setdefault(EXIT_INVALID, []).append(f"{event.kind}: {event.details()}")


def evaluate(
    summary: Summary, gates: GatesSpec, regression: RunComparison | None = None, bad_input: Sequence[str] = ()
) -> Verdict:
    """The exit code and its reasons for a summary (and a comparison with a baseline run, if made)."""
    reasons: dict[int, list[str]] = {}
    if bad_input:
        reasons[EXIT_BAD_INPUT] = list(bad_input)
    _event_reasons(summary.events, reasons)
    succeeded = sum(s.requests - s.errors for entry in summary.variants.values() for s in entry.steps)
    for problem in unclean(summary):
        reasons.setdefault(EXIT_INVALID, []).append(problem)
    if not summary.variants:
        reasons.setdefault(EXIT_INVALID, []).append("no variant was measured")
    elif succeeded == 0:
        reasons.setdefault(EXIT_INVALID, []).append("no request sent in a steady window succeeded")
    if regression is not None:
        for row in regression.regressions:
            assert row.ci95 is not None  # a regression is a row whose whole interval lies below 1
            reasons.setdefault(EXIT_REGRESSION, []).append(
                f"{row.variant} @ {lvl(row.level)}: {row.metric} x{row.ratio:.3f} (CI {row.ci95[0]:.3f}"
                f"-{row.ci95[1]:.3f}) vs {regression.old}"
            )
    if summary.quality is not None:  # a variant whose answers got worse than the baseline's beyond the gate
        for name, quality in summary.quality.variants.items():
            if not quality.eligible:
                reasons.setdefault(EXIT_SLO, []).append(f"{name}: {quality.reason}")
    checks = slo_checks(summary, gates)
    for check in checks:
        if not check.ok:
            value = "not measured in the steady window" if check.value is None else f"{check.value:.4g}"
            where = f"{lvl(check.level)}" + (f" with {check.context}-token prompts" if check.context else "")
            reasons.setdefault(EXIT_SLO, []).append(
                f"{check.variant} @ {where}: {check.gate} {value} > {check.limit:g}"
            )
    soak = summary.soak
    if soak is not None:
        for soak_check in soak.checks:
            checks.append(
                GateCheck(
                    gate=f"{soak_check.gate}:{soak_check.figure}",
                    variant=soak.variant,
                    level=soak.level,
                    value=soak_check.value,
                    limit=soak_check.limit,
                    ok=soak_check.ok,
                )
            )
            if not soak_check.ok:
                reasons.setdefault(EXIT_SLO, []).append(f"soak {soak.variant} @ {lvl(soak.level)}: {soak_check.text}")
    for check in scale_out_checks(summary):
        checks.append(check)
        if not check.ok:
            reasons.setdefault(EXIT_SLO, []).append(
                f"scale-out {check.variant} @ {lvl(check.level)} per server: efficiency {check.value:.3g}, its whole "
                f"CI below scale_out.min_efficiency {check.limit:g}"
            )
    code = next((c for c in SEVERITY if c in reasons), EXIT_OK)
    return Verdict(exit_code=code, reasons={str(k): v for k, v in sorted(reasons.items())}, checks=checks)
