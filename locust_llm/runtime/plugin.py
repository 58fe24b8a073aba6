"""Wires locust-llm into Locust: custom arguments, messages between processes, run start and end.

Importing this module registers the listeners; ``locustfiles/spec_decode.py`` does that and exposes the
user classes and the ladder shape. What the plugin keeps per environment lives in one ``LLMState``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import gevent
from locust import events
from locust import log as locust_log
from locust.runners import MasterRunner, WorkerRunner

from ..analysis.gates import EXIT_INTERRUPTED
from ..records import now
from ..rundir import layout
from ..scenario import ScenarioError
from ..workload import Workload, counter_for
from . import users, webui
from .experiment import Experiment
from .plan import DEFAULT_SCENARIO, claim_run_dir, load_plan
from .shipper import RECORDS_MESSAGE, RecordShipper
from .steps import STEP_MESSAGE, StepState

log = logging.getLogger(__name__)

__all__ = ["LLMState", "register", "start_experiment", "state_of"]

DEFAULT_STOP_TIMEOUT_S = 60.0
PROJECT_SCENARIOS = "scenarios"


@dataclass
class LLMState:
    """The plugin's state on one Locust environment (master or local process)."""

    experiment: Experiment | None = None  # the run in progress
    last: Experiment | None = None  # the latest run, finished or not (the web UI shows it)
    cli_scenario: str = ""  # the scenario named on the command line (the web form may also pick scenarios/*)


def state_of(environment) -> LLMState:
    state = getattr(environment, "llm_state", None)
    if state is None:
        state = environment.llm_state = LLMState()
    return state


def add_arguments(parser) -> None:
    # Registered on the parser itself (not an argument group), so Locust's web form shows them.
    arg = parser.add_argument
    arg("--scenario", type=str, default=DEFAULT_SCENARIO, help="scenario YAML file")
    arg("--variant", type=str, default="", help="run only this variant (default: all, baseline first)")
    arg("--mode", type=str, default="", help="closed (users) or open (arrival rate); empty: the scenario's")
    arg("--ladder", type=str, default="", help="comma list: users (closed) or req/s (open); empty: the scenario's")
    arg("--step-duration", type=float, default=0.0, help="steady window per step, seconds (0: the scenario's)")
    arg("--warmup", type=float, default=-1.0, help="warm-up per step, seconds, excluded (negative: the scenario's)")
    arg("--repeats", type=int, default=0, help="measure each level this many times per variant (0: the scenario's)")
    arg("--order", type=str, default="",
        help="sequential or interleaved (ABBA blocks per level; default when repeats >= 2); empty: the scenario's")
    arg("--min-requests", type=int, default=-1,
        help="completed requests a steady window needs, else the step is insufficient (negative: the scenario's)")
    arg("--prompt-tokens", type=int, default=0, help="prompt length in tokens (0: the scenario's)")
    arg("--max-tokens", type=int, default=0, help="output length in tokens (0: the scenario's)")
    arg("--api", type=str, default="", help="completions or chat (empty: the scenario's)")
    arg("--model", type=str, default="", help="model name to request (default: the server's)")
    arg("--report-dir", type=str, default="reports", help="where run directories are written")
    arg("--run-id", type=str, default="", help="run directory name (default: time + scenario)")
    arg("--overwrite", action="store_true", default=False, help="replace an existing run directory of that name")
    arg("--slo-ttft-p99-ms", type=float, default=0.0, help="gate: P99 TTFT per step (0: the scenario's)")
    arg("--slo-tpot-p99-ms", type=float, default=0.0, help="gate: P99 TPOT per step (0: the scenario's)")
    arg("--slo-error-rate", type=float, default=-1.0, help="gate: error rate per step, 0..1 (negative: the scenario's)")
    arg("--max-regression-pct", type=float, default=-1.0,
        help="gate: worst change vs the baseline run, percent (negative: the scenario's)")
    arg("--baseline-run", type=str, default="", help="saved baseline run to compare against")
    arg("--prometheus-url", type=str, default="",
        help="query this Prometheus for server/GPU metrics (default: scrape /metrics directly)")


def on_step_message(environment, msg, **_kw) -> None:
    context = users.context_of(environment)
    state = StepState(**msg.data)
    context.board.update(state, now())
    if state.base_url and context.workload_factory is not None:
        # Tokenizing the prompt set takes a moment: start it as soon as the server is known.
        context.prepare(state.base_url)


def live_rows(environment) -> list[dict]:
    experiment = state_of(environment).last
    return experiment.recorder.live.rows() if experiment is not None else []


def last_report(environment) -> Path | None:
    experiment = state_of(environment).last
    path = experiment.run.file(layout.REPORT) if experiment is not None else None
    return path if path is not None and path.exists() else None


def on_records_message(environment, msg, **_kw) -> None:
    experiment = state_of(environment).experiment
    if experiment is not None:
        experiment.recorder.on_batch(msg.data)


def interrupt(environment, signum: int) -> None:
    """SIGTERM or Ctrl-C on the master: the run stops like the Stop button and still writes everything.

    Locust installs its own SIGTERM handler only after a headless shape test has ended, so the plugin handles
    the signals itself; the handler only spawns this (a signal callback must not block)."""
    name = signal.Signals(signum).name
    experiment = state_of(environment).experiment
    if experiment is not None and not experiment.finished:
        experiment.interrupt(name)
        if environment.parsed_options.headless:
            return  # the shape ends, Locust quits, on_quitting writes the run and sets the exit code
        while not experiment.finished:
            gevent.sleep(0.2)
    if experiment is not None:
        experiment.finish(final=True)
        environment.runner.quit()
        os._exit(experiment.outcome.verdict.exit_code if experiment.outcome else EXIT_INTERRUPTED)
    environment.runner.quit()
    os._exit(128 + signum)


def handle_signals(environment) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, lambda s=signum: gevent.spawn(interrupt, environment, s))


def on_init(environment, runner=None, **_kw) -> None:
    if runner is None:
        return
    if not isinstance(runner, WorkerRunner):
        handle_signals(environment)
        state_of(environment).cli_scenario = environment.parsed_options.scenario
        runner.register_message(RECORDS_MESSAGE, on_records_message)
        webui.install(environment, rows=lambda: live_rows(environment), report_path=lambda: last_report(environment))
    if not isinstance(runner, MasterRunner):
        runner.register_message(STEP_MESSAGE, on_step_message)
    if not environment.stop_timeout:
        # Stepping down or switching variants lets streams in flight finish instead of killing them.
        environment.stop_timeout = DEFAULT_STOP_TIMEOUT_S


def _setup_load_process(environment) -> None:
    """Worker side: what the users of this process share for the run."""
    runner = environment.runner
    worker = max(getattr(runner, "worker_index", 0), 0)
    plan = load_plan(environment.parsed_options, environment.host)
    load = plan.load
    context = users.context_of(environment)
    shipper = RecordShipper(runner, worker, measuring=lambda: context.board.state.active)
    context.configure(load=load, worker=worker, engine=plan.engine, shipper=shipper,
                      workload_factory=lambda base_url: Workload.from_spec(
                          load, counter_for(base_url, load.tokenizer), plan.base_dir))
    context.shipper.start()


def _fail(environment, message: str) -> None:
    log.error(message)
    environment.process_exit_code = 2
    if environment.parsed_options.headless:
        environment.runner.quit()
    else:
        environment.runner.stop()


def check_web_scenario(chosen: str, cli_scenario: str) -> None:
    """Anyone who can reach the web UI can fill its form: it runs the command line's scenario or one of the
    project's own (``scenarios/*.yaml``), never an arbitrary file."""
    path = Path(chosen or DEFAULT_SCENARIO).resolve()
    allowed = {Path(cli_scenario or DEFAULT_SCENARIO).resolve()}
    allowed |= {p.resolve() for p in Path(PROJECT_SCENARIOS).glob("*.yaml")}
    if path not in allowed:
        raise ScenarioError(f"the web form runs the scenario given on the command line or one under "
                            f"{PROJECT_SCENARIOS}/; {chosen!r} is neither")


def start_experiment(environment) -> Experiment | None:
    """Called by the shape's first tick of a run (before Locust fires test_start)."""
    state = state_of(environment)
    if state.experiment is not None:
        state.experiment.finish(final=True)
    state.experiment = None
    try:
        if not environment.parsed_options.headless:
            check_web_scenario(environment.parsed_options.scenario, state.cli_scenario)
        plan = load_plan(environment.parsed_options, environment.host)
        claim_run_dir(plan, environment.parsed_options.overwrite)
    except ScenarioError as exc:
        _fail(environment, str(exc))
        return None
    classes = {"closed": users.ClosedLoopUser, "open": users.OpenLoopUser}
    state.experiment = state.last = Experiment(environment, plan, classes)
    log.info("run %s -> %s", plan.run_id, state.experiment.run.path)
    return state.experiment


def on_test_start(environment, **_kw) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        handle_signals(environment)  # again: in the web UI, Locust's own handler was installed after on_init
    if isinstance(environment.runner, MasterRunner):
        return
    try:
        _setup_load_process(environment)
    except ScenarioError as exc:
        _fail(environment, str(exc))


def on_test_stop(environment, **_kw) -> None:
    shipper = users.context_of(environment).shipper
    if not isinstance(environment.runner, MasterRunner) and shipper is not None:
        shipper.stop()
    experiment = state_of(environment).experiment
    if experiment is not None:
        experiment.finish(final=False)


def on_quitting(environment, **_kw) -> None:
    state = state_of(environment)
    experiment, state.experiment = state.experiment, None
    if experiment is None:
        return
    run_path = experiment.finish(final=True)
    outcome = experiment.outcome
    if outcome is not None:
        # stderr, beside Locust's own tables: stdout stays clean for --json
        print(outcome.text, file=sys.stderr)
    print(f"run directory: {run_path}", file=sys.stderr)
    crashed = bool(environment.runner.exceptions) or locust_log.unhandled_greenlet_exception
    if crashed:
        log.error("the load test itself failed (see the exceptions above): Locust's exit code stands")
    elif environment.process_exit_code is None and outcome is not None:
        environment.process_exit_code = outcome.verdict.exit_code


def register(events_hooks) -> None:
    """Attach locust-llm to a set of Locust event hooks (``locust.events`` on import)."""
    events_hooks.init_command_line_parser.add_listener(add_arguments)
    events_hooks.init.add_listener(on_init)
    events_hooks.test_start.add_listener(on_test_start)
    events_hooks.test_stop.add_listener(on_test_stop)
    events_hooks.quitting.add_listener(on_quitting)


register(events)
