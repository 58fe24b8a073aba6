"""The experiment on the master: variants in sequence, each over the ladder, with servers started and stopped.

``Experiment.program()`` is a generator the load shape advances once per tick; each value is
Locust's ``(users, spawn_rate, user_classes)``. Blocking work (starting a server) happens inside
it, on the shape's greenlet, while Locust keeps serving heartbeats.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import locust  # noqa: F401  (gevent must patch sockets before requests is imported)
import numpy as np
import requests

from .analysis.gates import EXIT_BAD_INPUT, Gates, format_verdict, verdict
from .analysis.regression import compare_runs
from .analysis.steady import drift
from .analysis.summary import load_run, write_summary
from .recorder import Recorder
from .records import now
from .report.render import render_report
from .consistency import greedy_outputs
from .rundir import RunDir, host_info, package_versions, write_json
from .scenario import GatesSpec, LoadSpec, Scenario, TelemetrySpec
from .servers import ServerError, ServerProcess, launch_variant
from .steps import STEP_MESSAGE, StepState
from .telemetry.poller import TelemetryPoller
from .telemetry.prometheus_server import PrometheusError, PrometheusServer, prometheus_binary
from .workload import Workload, WorkloadError, counter_for

log = logging.getLogger(__name__)

CONSISTENCY_PROMPTS = 4


@dataclass
class Plan:
    """The scenario with command-line/web-form overrides applied: what will run."""

    scenario: Scenario
    load: LoadSpec
    telemetry: TelemetrySpec
    gates: GatesSpec
    variants: list[str]
    external_url: str | None
    model: str
    report_dir: Path
    run_id: str
    options: dict = field(default_factory=dict)


@dataclass
class ActiveServer:
    variant: str
    base_url: str
    model: str
    process: ServerProcess | None  # None when attached to a server we did not start
    exit_reported: bool = False


class Experiment:
    def __init__(self, environment, plan: Plan, user_classes: dict[str, type]):
        self.environment = environment
        self.plan = plan
        self.user_classes = user_classes
        self.run = RunDir(plan.report_dir, plan.run_id)
        self.recorder = Recorder(self.run.path)
        self.server: ActiveServer | None = None
        self.state = StepState(run_id=plan.run_id, mode=plan.load.mode, seed=plan.load.seed)
        self.finished = False
        self.closed = False
        self.consistency: dict[str, list[dict]] = {}
        self.verdict: dict | None = None
        self.analysed: tuple | None = None  # (records, run events) the last summary was computed from
        self.run.env = {
            "run_id": plan.run_id, "scenario": plan.scenario.model_dump(mode="json"),
            "scenario_file": str(plan.scenario.source), "load": plan.load.model_dump(mode="json"),
            "variants": plan.variants, "baseline": plan.scenario.baseline_variant, "options": plan.options,
            "external_url": plan.external_url, "servers": {}, "host": host_info(),
            "client": {"packages": package_versions()}, "seed": plan.load.seed,
        }
        self.run.write_env()
        self.run.write_steps()
        self.telemetry = TelemetryPoller(self.run.path, interval_s=plan.telemetry.interval_s)
        self.prometheus = self.start_prometheus()

    def start_prometheus(self) -> PrometheusServer | None:
        spec = self.plan.telemetry
        if spec.prometheus == "off" or (spec.prometheus == "auto" and not prometheus_binary()):
            return None
        try:
            return PrometheusServer(scrape_interval_s=min(spec.interval_s, 1.0), dcgm_url=spec.dcgm_url,
                                    log_path=self.run.file("prometheus.log")).start()
        except PrometheusError as exc:
            log.warning("no Prometheus of our own (%s); scraping /metrics directly", exc)
            self.run.note("prometheus_unavailable", error=str(exc))
            return None

    # -- load shape program ---------------------------------------------------------------
    def program(self) -> Iterator[tuple]:
        load = self.plan.load
        for variant in self.plan.variants:
            try:
                self.start_server(variant)
            except ServerError as exc:
                log.error("variant %s: %s", variant, exc)
                self.run.note("server_start_failed", variant=variant, error=str(exc))
                continue
            self.broadcast(variant, -1, math.nan, "starting")
            self.check_consistency(variant)
            classes = [self.user_classes[load.mode]]
            for step, level in enumerate(self.levels()):
                users = self.users_for(level)
                row = {"variant": variant, "step": step, "level": level, "mode": load.mode, "users": users,
                       "t_start": now(), "t_steady": math.nan, "t_end": math.nan}
                self.run.steps.append(row)
                self.broadcast(variant, step, level, "warmup")
                self.announce(variant, step, level)
                yield from self.hold(row["t_start"] + load.warmup_s, (users, max(users, 1), classes))
                row["t_steady"] = now()
                self.broadcast(variant, step, level, "steady")
                yield from self.hold(row["t_steady"] + load.step_duration_s, (users, max(users, 1), classes))
                row["extended_s"] = 0.0
                while row["extended_s"] < load.max_extend_s and not self.looks_steady(variant, level, row):
                    extra = min(load.step_duration_s / 2, load.max_extend_s - row["extended_s"])
                    log.info("variant %s level %g: throughput still drifting; extending the step by %gs",
                             variant, level, extra)
                    row["extended_s"] += extra
                    yield from self.hold(now() + extra, (users, max(users, 1), classes))
                row["t_end"] = now()
                self.run.write_steps()
                if not self.server_alive():
                    break
            self.broadcast(variant, self.state.step, self.state.level, "drain")
            yield from self.drain(classes)
            self.stop_server()
        self.broadcast(self.state.variant, self.state.step, self.state.level, "idle")

    def levels(self) -> list[float]:
        return list(self.plan.load.ladder) * self.plan.load.repeats

    def looks_steady(self, variant: str, level: float, row: dict) -> bool:
        """Drift of completed tokens per second since the steady window began, from the live figures."""
        rates = self.recorder.live.token_rates(variant, level, row["t_steady"], now())
        if rates.size < 3:
            return True
        verdict = drift(row["t_steady"] + np.arange(rates.size) + 0.5, rates)["steady"]
        return verdict is not False

    def announce(self, variant: str, step: int, level: float) -> None:
        """Headless progress: where the run is and roughly how long it has left (server starts not counted)."""
        load = self.plan.load
        per_step = load.warmup_s + load.step_duration_s
        count = len(self.levels())
        position = self.plan.variants.index(variant)
        steps_left = (count - step) + count * (len(self.plan.variants) - position - 1)
        unit = "req/s" if load.mode == "open" else "users"
        log.info("variant %s (%d/%d), level %g %s (step %d/%d): warm-up %gs + steady %gs; about %ds left",
                 variant, position + 1, len(self.plan.variants), level, unit, step + 1, count, load.warmup_s,
                 load.step_duration_s, steps_left * per_step)

    def hold(self, until: float, tick: tuple) -> Iterator[tuple]:
        while now() < until:
            if not self.server_alive():
                return
            self.send_state()
            yield tick

    def drain(self, classes: list[type]) -> Iterator[tuple]:
        """Zero users; wait until every stream in flight has ended and its record has arrived."""
        deadline = now() + (self.environment.stop_timeout or 0) + 30.0
        while now() < deadline:
            self.send_state()
            yield (0, 100, classes)
            if self.environment.runner.user_count == 0 and self.recorder.drained():
                return
        log.warning("drain timed out; records missing per worker: %s", self.recorder.missing())
        self.run.note("drain_timeout", missing=self.recorder.missing())

    def users_for(self, level: float) -> int:
        if self.plan.load.mode == "open":
            # One dispatcher per load-generating process; each sends level / workers req/s.
            return max(self.worker_count(), 1)
        return max(int(round(level)), 1)

    def worker_count(self) -> int:
        runner = self.environment.runner
        return getattr(runner, "worker_count", 1) if type(runner).__name__ == "MasterRunner" else 1

    # -- step state -----------------------------------------------------------------------
    def broadcast(self, variant: str, step: int, level: float, phase: str) -> None:
        server = self.server
        self.state = StepState(run_id=self.plan.run_id, variant=variant, step=step, level=level, phase=phase,
                               mode=self.plan.load.mode, base_url=server.base_url if server else "",
                               model=server.model if server else "", workers=max(self.worker_count(), 1),
                               seed=self.plan.load.seed)
        self.send_state()

    def send_state(self) -> None:
        # Sent every tick, so a worker that joins late still learns the current step.
        self.environment.runner.send_message(STEP_MESSAGE, self.state.to_dict())

    # -- servers --------------------------------------------------------------------------
    def start_server(self, variant: str) -> None:
        if self.plan.external_url:
            url = self.plan.external_url.rstrip("/")
            model = self.plan.model or served_model(url)
            self.server = ActiveServer(variant, url, model, None)
            self.run.env["servers"][variant] = {"url": url, "served_model": model, "launched": False}
        else:
            log.info("starting the %s server for variant %s", self.plan.scenario.server.engine, variant)
            process = launch_variant(self.plan.scenario, variant, log_dir=self.run.path)
            model = self.plan.model or process.served_model or ""
            self.server = ActiveServer(variant, process.base_url, model, process)
            self.run.env["servers"][variant] = {**process.describe(), "launched": True,
                                                "speculative": self.speculative_of(variant)}
        self.run.write_env()
        self.attach_telemetry(variant)

    def attach_telemetry(self, variant: str) -> None:
        server, spec = self.server, self.plan.telemetry
        prometheus_url, selector = spec.prometheus_url, None
        if self.prometheus is not None:
            self.prometheus.set_server(variant, server.base_url)
            self.prometheus.wait_for_target(variant)
            prometheus_url, selector = self.prometheus.url, self.prometheus.selector(variant)
        engine = "external" if server.process is None else self.plan.scenario.server.engine
        pid = server.process.proc.pid if server.process is not None and server.process.proc else None
        self.telemetry.attach(variant, engine, server.base_url, server_pid=pid, prometheus_url=prometheus_url,
                              dcgm_url=spec.dcgm_url, prometheus_selector=selector)

    def check_consistency(self, variant: str) -> None:
        """Fixed greedy prompts before the ladder; the analysis compares every variant with the baseline."""
        server, load = self.server, self.plan.load
        engine = "external" if self.plan.external_url else self.plan.scenario.server.engine
        try:
            workload = Workload.from_spec(load, counter_for(server.base_url), self.plan.scenario.source.parent)
        except WorkloadError as exc:
            self.run.note("consistency_skipped", variant=variant, error=str(exc))
            return
        prompts = workload.consistency_prompts(CONSISTENCY_PROMPTS, max_tokens=min(load.max_tokens, 64))
        self.consistency[variant] = greedy_outputs(server.base_url, engine, server.model, prompts)
        write_json(self.run.file("consistency.json"), self.consistency)

    def speculative_of(self, variant: str) -> dict | None:
        spec = self.plan.scenario.speculative(variant)
        return spec.model_dump(mode="json") if spec is not None else None

    def server_alive(self) -> bool:
        server = self.server
        if server is None or server.process is None or server.process.alive():
            return True
        if not server.exit_reported:
            server.exit_reported = True
            tail = server.process.log_tail()
            log.error("the %s server exited during the run; moving on. Log tail:\n%s", server.variant, tail)
            self.run.note("server_exited", variant=server.variant, log_tail=tail)
        return False

    def stop_server(self) -> None:
        if self.server is None:
            return
        self.telemetry.detach()  # a last sample while the server still answers
        if self.server.process is not None:
            self.server.process.stop()
        self.server = None

    # -- end ------------------------------------------------------------------------------
    def finish(self, final: bool) -> Path:
        """Stop what runs, write requests.parquet and summary.json; safe to call more than once."""
        self.finished = True
        if self.closed:
            return self.run.file("requests.parquet")
        self.closed = final
        self.stop_server()
        for row in self.run.steps:
            if math.isnan(row["t_end"]):
                row["t_end"] = now()
        missing = self.recorder.missing()
        if missing:
            self.run.note("records_missing", missing=missing)
        self.run.write_steps()
        requests_path = self.recorder.close() if final else self.recorder.finalize()
        if final:
            self.telemetry.close()
            if self.prometheus is not None:
                self.prometheus.stop()
        analysed = (self.recorder.rows_written, len(self.run.events))
        if analysed == self.analysed:
            return requests_path  # headless runs stop, then quit: nothing new arrived in between
        self.analysed = analysed
        write_summary(self.run.path)
        self.verdict = self.conclude()
        try:
            render_report(self.run.path)
        except Exception:  # the measurements are on disk; a report bug must not hide them or the verdict
            log.exception("could not render the HTML report; `locust-llm report %s` retries", self.run.path)
        return requests_path

    def conclude(self) -> dict:
        """Gates, and the regression check against a saved baseline run when the scenario names one."""
        gates = self.plan.gates
        summary = json.loads(self.run.file("summary.json").read_text())
        regression, missing_baseline = None, None
        if gates.baseline_run:
            saved = Path(gates.library) / gates.baseline_run
            if (saved / "steps.json").exists():
                regression = compare_runs(load_run(saved), load_run(self.run.path), gates.max_regression_pct)
                write_json(self.run.file("compare.json"), regression)
            else:
                missing_baseline = (f"baseline run {gates.baseline_run!r} not found in {gates.library}/ "
                                    "(save one with `locust-llm baseline save`)")
        result = verdict(summary, Gates(gates.ttft_p99_ms, gates.tpot_p99_ms, gates.error_rate), regression)
        if missing_baseline:
            result["exit_code"] = EXIT_BAD_INPUT
            result["reasons"][str(EXIT_BAD_INPUT)] = [missing_baseline]
        write_json(self.run.file("verdict.json"), result)
        result["text"] = format_verdict(summary, result)
        return result


def served_model(base_url: str) -> str:
    try:
        data = requests.get(f"{base_url}/v1/models", timeout=10).json().get("data") or []
        return data[0].get("id", "") if data else ""
    except (requests.RequestException, ValueError):
        return ""
