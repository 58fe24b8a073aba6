"""What each step's figures may be used for: ``clean``, or why not. Pure.

A step is, in this order of precedence (docs/verdicts-and-gates.md, "What a verdict rests on"):

* ``suspect-usage``: the server's token counts disagree with what it was asked for or what it sent
  (``suspect_usage`` requests: docs/faults-and-probes.md, "Faults and bad input"), so its throughput cannot be trusted;
* ``failed-fast``: most requests were refused (connection, TLS) or failed within ``FAST_FAIL_S`` of their start
  (reset, an error status), before any token:
  the server refused or failed fast, so neither its speed nor the client's load is measured;
* ``contended``: the host was busy with work that is neither the server nor the load generator (nor our own
  Prometheus): on average more than ``load.contention_cores`` cores of CPU (steal time on a VM included) over
  the steady window, or any foreign GPU process. Another job on the machine slows whichever variant it
  overlaps, and that is not the variant's doing;
* ``client-invalid``: the load generator could have spoiled the step's throughput (``validity.client_validity``: a
  process at the end of its core, closed-loop users waiting on the client, open-loop arrivals dropped or not sent);
  a lag that can only move latency figures marks those figures, not the step;
* ``insufficient``: fewer than ``load.min_requests`` requests sent in the window completed, or fewer than
  ``load.min_output_tokens`` output tokens arrived: too little to rest a verdict on;
* ``unsteady``: in a closed loop the aggregate throughput drifted within the window (``steady.drift``: its drift
  interval excludes 0 and is not inside +-10%; over request-cycle batches, not judged with fewer than 5 of
  them, AR(1)-aware 1-second bins in runs that recorded no users);
  in an open loop, where the offered rate sets throughput, the latency from the intended send or the requests in
  flight drifted (a server falling behind). A TPOT drift alone is shown (``steady`` is false) but does not
  disqualify the step: the headline is throughput, the latency speed-ups pair requests, and interleaved blocks put
  a slow drift on both sides;
* ``too-noisy``: the drift interval holds 0 but reaches past +-10%: the window cannot tell steady from drifting
  (a longer step can); left out of verdicts like ``unsteady``, and said apart from it;
* ``clean``: none of these.

Only clean steps feed speed-ups, crossover, recommendation, saturation and knee. A closed-loop step whose
throughput falls by more than half from the level below is flagged as an anomaly (kept, but said).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pandas as pd

from ..fmt import lvl
from ..records import FAST_FAIL_S
from ..rundir.env import RecordedLoad
from .probes import fault_text
from .steady import DRIFT_TOLERANCE, TOO_NOISY

__all__ = ["ANOMALY_DROP", "CLEAN", "STATUSES", "busy_text", "flag_anomalies", "host_load", "step_status"]

CLEAN = "clean"
STATUSES = (
    "fault-injected",
    "worker-lost",
    "suspect-usage",
    "failed-fast",
    "contended",
    "client-invalid",
    "insufficient",
    "unsteady",
    "too-noisy",
    CLEAN,
)
ANOMALY_DROP = 0.5
STEADY_NAMES = {
    "throughput": "throughput",
    "latency": "E2E from the intended send",
    "in_flight": "the requests in flight",
}
TOP_FOREIGN = 3


def host_load(host: pd.DataFrame, start: float, end: float) -> dict | None:
    """The foreign load on the host over ``[start, end]``: mean cores (CPU and steal), foreign GPU processes,
    and the processes that used most; None when the host was not monitored then."""
    if not len(host) or not (math.isfinite(start) and math.isfinite(end)):
        return None
    window = host[(host["t"] > start) & (host["t"] <= end + 0.5)]
    if not len(window):
        return None
    seconds = float(window["interval_s"].sum())
    used: dict[tuple, float] = defaultdict(float)
    for text, interval in zip(window["top_foreign"], window["interval_s"], strict=False):
        for proc in json.loads(text or "[]"):
            used[(proc.get("pid"), str(proc.get("name")))] += float(proc.get("cores", 0.0)) * float(interval)
    top = sorted(used.items(), key=lambda item: -item[1])[:TOP_FOREIGN]
    return {
        "samples": int(len(window)),
        "foreign_cores": float(window["foreign_cores"].mean()),
        "steal_cores": float(window["steal_cores"].mean()),
        "own_cores": float(window["own_cores"].mean()),
        "foreign_gpu_processes": int(window["foreign_gpu_processes"].max()),
        "top_foreign": [
            {"pid": pid, "name": name, "cores": round(total / seconds, 3) if seconds else None}
            for (pid, name), total in top
        ],
    }


def busy_text(host: dict) -> str:
    top = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cores']:.2f}" for p in host["top_foreign"])
    text = f"{host['foreign_cores'] + host['steal_cores']:.2f} cores busy outside the server and load generator"
    if host["steal_cores"] >= 0.01:
        text += f" ({host['steal_cores']:.2f} of them stolen by the hypervisor)"
    if host["foreign_gpu_processes"]:
        text += f"; {host['foreign_gpu_processes']} other GPU process(es)"
    return text + (f"; top: {top}" if top else "")


def step_status(step: dict, host: dict | None, load: RecordedLoad) -> tuple[str, list[str]]:
    """The step's status and every reason that applies (the status is the first in ``STATUSES`` order)."""
    reasons: dict[str, str] = {}
    if step.get("faults"):  # injected on purpose (``probes.faults``): shown, never measured as the server's speed
        reasons["fault-injected"] = "; ".join(fault_text(fault) for fault in step["faults"])
    if step.get("workers_lost"):
        reasons["worker-lost"] = (
            f"load process(es) {', '.join(map(str, step['workers_lost']))} lost during the step: the level was not held"
        )
    if step.get("suspect_usage"):
        reasons["suspect-usage"] = (
            f"{step['suspect_usage']} request(s) whose server token counts disagree with the request or its text "
            "(suspect_usage): its throughput cannot be trusted"
        )
    failed_fast = step.get("failed_fast") or 0
    if failed_fast * 2 > step.get("requests", 0) > 0:
        reasons["failed-fast"] = (
            f"the server refused or failed fast: {failed_fast} of {step['requests']} requests were refused "
            f"(connection, TLS) or failed within {FAST_FAIL_S * 1000:g} ms, before any token"
        )
    limit = load.contention_cores if load.contention_cores is not None else 0.25
    if host is not None and (host["foreign_cores"] + host["steal_cores"] > limit or host["foreign_gpu_processes"]):
        reasons["contended"] = f"host busy: {busy_text(host)} (limit {limit:g} cores)"
    if step.get("client_valid") is False and "failed-fast" not in reasons:  # a client kept busy by refusals
        reasons["client-invalid"] = "the client was the bottleneck: " + "; ".join(step["client_validity"]["reasons"])
    insufficient = _insufficient(step, load)
    if insufficient:
        reasons["insufficient"] = insufficient
    check = step.get("steady_check") or {}
    deciding = ("latency", "in_flight") if step.get("mode") == "open" else ("throughput",)
    drifting = [
        f"{STEADY_NAMES[name]} drifted by {check[name].get('drift_fraction') or 0:.0%} of its mean"
        for name in deciding
        if check.get(name) and check[name].get("steady") is False
    ]
    if drifting:
        reasons["unsteady"] = " and ".join(drifting) + " within the steady window"
    noisy = [
        f"{STEADY_NAMES[name]} drift {_interval(check[name]['drift_ci90'])} of its mean (90% interval)"
        for name in deciding
        if check.get(name) and check[name].get("status") == TOO_NOISY
    ]
    if noisy:
        reasons["too-noisy"] = (
            " and ".join(noisy) + f": too noisy to tell steady (inside +-{DRIFT_TOLERANCE:.0%}) from drifting"
        )
    status = next((s for s in STATUSES if s in reasons), CLEAN)
    return status, [f"{name}: {text}" for name, text in reasons.items()]


def _interval(ci: list[float]) -> str:
    return f"[{ci[0]:+.0%}, {ci[1]:+.0%}]"


def _insufficient(step: dict, load: RecordedLoad) -> str | None:
    window = step.get("window_s")
    if not window:
        return "no steady window was measured"
    completed = step.get("requests", 0) - step.get("errors", 0)
    need_requests = load.min_requests if load.min_requests is not None else 20
    need_tokens = load.min_output_tokens if load.min_output_tokens is not None else 100
    if completed >= need_requests and step.get("output_tokens", 0) >= need_tokens:
        return None
    e2e = (step.get("e2e_ms") or {}).get("p50")
    extended = f" (extended by {step['extended_s']:g} s)" if step.get("extended_s") else ""
    if completed > 0:
        took = f"requests took {e2e / 1000:.1f} s each, so " if e2e else ""
        seen = (
            f"{took}the {window:.0f} s window{extended} saw {completed} completed requests and "
            f"{step.get('output_tokens', 0)} output tokens"
        )
    else:  # nothing completed: there is no request time to quote, only what was sent and what failed
        seen = (
            f"none of the {step.get('requests', 0)} requests sent in the {window:.0f} s window{extended} "
            f"completed ({step.get('errors', 0)} failed)"
        )
    if step.get("extended_s"):
        fix = "the extension ran out: make the step longer or raise load.max_extend_s"
    elif load.max_extend_s:
        fix = "make the step longer"
    else:
        fix = "make the step longer or allow load.max_extend_s"
    return f"{seen} (at least {need_requests} and {need_tokens} needed): {fix}"


def flag_anomalies(steps: list[dict]) -> None:
    """Closed loop: mark the steps of a level whose mean throughput is below half of the level below's."""
    by_level: dict[float, list[dict]] = defaultdict(list)
    for step in steps:
        if step.get("mode") == "closed" and step.get("output_tps") is not None:
            by_level[float(step["level"])].append(step)
    mean = {level: sum(s["output_tps"] for s in group) / len(group) for level, group in by_level.items()}
    levels = sorted(by_level)
    for lower, upper in zip(levels, levels[1:], strict=False):
        if mean[upper] < ANOMALY_DROP * mean[lower]:
            for step in by_level[upper]:
                step["anomaly"] = (
                    f"throughput fell from {mean[lower]:.1f} tok/s at {lvl(lower)} to "
                    f"{mean[upper]:.1f} tok/s at {lvl(upper)} (by more than half): a slower server, "
                    "errors or outside interference; re-test this level"
                )
