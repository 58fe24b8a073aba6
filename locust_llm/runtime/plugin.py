"""Wires locust-llm into Locust: custom arguments, messages between processes, run start and end.

Importing this module registers the listeners; ``locustfiles/spec_decode.py`` does that and exposes the
user classes and the ladder shape. What the plugin keeps per environment lives in one ``LLMState``.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import gevent
import psutil
from locust import argument_parser, events
from locust import log as locust_log
from locust.runners import MasterRunner, WorkerRunner

from ..analysis.gates import EXIT_INTERRUPTED, EXIT_INVALID
from ..client import ledger
from ..client.engines import use_key_env
from ..records import now
from ..rundir.redact import mask_log_records, redact_text
from ..scenario import ScenarioError
from . import users, webui
from .clocksync import CLOCK_PING, CLOCK_PONG, ClockSync, answer_ping
from .experiment import Experiment
from .options import OPTIONS
from .plan import capacity_warnings, check_baseline, check_dataset, claim_run_dir, load_plan
from .session import workload_for
from .shipper import CREATED_MESSAGE, RECORDS_MESSAGE, RecordShipper
from .steps import STEP_MESSAGE, StepState
from .webform import check_web_scenario, with_baseline

log = logging.getLogger(__name__)

__all__ = ["LLMState", "register", "start_experiment", "state_of"]

DEFAULT_STOP_TIMEOUT_S = 60.0
STOP_MARGIN_S = 5.0  # beyond a stream's own deadline: its timeout is recorded before the drain would cancel it
RUNNER_WAIT_S = 10.0


@dataclass
class LLMState:
    """The plugin's state on one Locust environment (master or local process)."""

    experiment: Experiment | None = None  # the run in progress
    last: Experiment | None = None  # the latest run, finished or not (the web UI shows it)
    cli_scenario: str = ""  # the scenario named on the command line (the web form may also pick scenarios/*)
    clocks: ClockSync | None = None  # the master's measure of its workers' clocks


def state_of(environment) -> LLMState:
    state = getattr(environment, "llm_state", None)
    if state is None:
        state = environment.llm_state = LLMState()
    return state


def add_arguments(parser) -> None:
    # On the parser itself (not an argument group), so Locust's web form shows them under "Custom parameters".
    for option in OPTIONS:
        kind = {"action": "store_true"} if isinstance(option.default, bool) else {"type": type(option.default)}
        if option.words:
            kind["nargs"] = "+"
        parser.add_argument(option.flag, default=option.default, help=option.help, include_in_web_ui=option.web, **kind)


def on_step_message(environment, msg, **_kw) -> None:
    context = users.context_of(environment)
    # Messages between processes turn tuples into lists; the board compares states, so the same one stays equal.
    state = StepState(**{**msg.data, "base_urls": tuple(msg.data.get("base_urls") or ())})
    context.board.update(state, now())
    if state.base_url and context.workload_factory is not None:
        # Tokenizing the prompt set takes a moment: start it as soon as the server is known.
        context.prepare(state.base_url)


def on_records_message(environment, msg, **_kw) -> None:
    experiment = state_of(environment).experiment
    if experiment is not None:
        experiment.recorder.on_batch(msg.data)


def on_workload_ready(environment, msg, **_kw) -> None:
    experiment = state_of(environment).experiment
    if experiment is not None:
        experiment.ready.setdefault(msg.data["base_url"], set()).add(msg.data["worker"])


def on_created_message(environment, msg, **_kw) -> None:
    experiment = state_of(environment).experiment
    if experiment is not None:
        experiment.recorder.on_created(msg.data)


def finished(environment, experiment: Experiment) -> Path | None:
    """The run finished and written (its directory); None, said in one line with exit 5, when the disk would not take
    it (full, or gone): never a traceback over the verdict."""
    try:
        return experiment.finish(final=True)
    except OSError as exc:
        parts = experiment.recorder.parts
        log.error(
            "the run directory %s could not be finished: %s; %d records could not be written (records_lost), %d "
            "were; exit 5",
            experiment.run.path,
            exc.strerror or exc,
            parts.rows_lost + parts.pending,
            parts.rows_written,
        )
        environment.process_exit_code = EXIT_INVALID
        return None


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
        written = finished(environment, experiment) is not None
        environment.runner.quit()
        if not written:
            os._exit(EXIT_INVALID)
        os._exit(experiment.outcome.verdict.exit_code if experiment.outcome else EXIT_INTERRUPTED)
    environment.runner.quit()
    os._exit(128 + signum)


def handle_signals(environment) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, lambda s=signum: gevent.spawn(interrupt, environment, s))


def parse_locust_defaults_once() -> None:
    """A worker answering a spawn message (every change of the user count: each ladder step) builds and parses
    Locust's whole argument parser once per option the master sent (``default_args_dict`` inside a comprehension,
    Locust 2.47): 4-5 ms each for about 90 options, 140-200 ms in which this process read no chunk, so the streams of
    the window that had just ended were stamped up to 256 ms late (against their server's own stamps) and the step's
    last batch read 5-10% slow. Locust's defaults cannot change within a process: parsed once."""
    if not hasattr(argument_parser.default_args_dict, "cache_info"):
        argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)


def on_init(environment, runner=None, **_kw) -> None:
    if runner is None:
        return
    if not isinstance(runner, WorkerRunner):
        handle_signals(environment)
        state_of(environment).cli_scenario = environment.parsed_options.scenario
        runner.register_message(RECORDS_MESSAGE, on_records_message)
        runner.register_message(users.WORKLOAD_READY, on_workload_ready)
        runner.register_message(CREATED_MESSAGE, on_created_message)
        if isinstance(runner, MasterRunner):
            clocks = state_of(environment).clocks = ClockSync(runner)
            runner.register_message(CLOCK_PONG, clocks.on_pong)
            # A worker that joins is measured as soon as it listens (it registers its handlers after connecting).
            environment.events.worker_connect.add_listener(lambda **_kw: gevent.spawn_later(1.0, clocks.ping))
        webui.install(
            environment,
            last_experiment=lambda: state_of(environment).last,
            cli_scenario=lambda: state_of(environment).cli_scenario,
        )
    if not isinstance(runner, MasterRunner):
        runner.register_message(STEP_MESSAGE, on_step_message)
    if isinstance(runner, WorkerRunner):
        runner.register_message(CLOCK_PING, answer_ping)
        parse_locust_defaults_once()
    if not environment.stop_timeout:
        # Stepping down or switching variants lets streams in flight finish instead of killing them.
        environment.stop_timeout = DEFAULT_STOP_TIMEOUT_S


def _setup_load_process(environment) -> None:
    """Worker side: what the users of this process share for the run."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        ledger.reset()  # a worker's requests of this run (in one process, the experiment counts from its start)
    worker = max(getattr(runner, "worker_index", 0), 0)
    plan = load_plan(environment.parsed_options, environment.host)
    for server in plan.attached.values():
        use_key_env(server.url, server.api_key_env)
    load = plan.load
    fit_stop_timeout(environment, load.timeouts)
    context = users.context_of(environment)
    shipper = RecordShipper(
        runner, worker, measuring=lambda: context.board.state.active, remote=isinstance(runner, WorkerRunner)
    )
    context.configure(
        load=load,
        worker=worker,
        engine=plan.engine,
        shipper=shipper,
        workload_factory=lambda base_url: workload_for(load, base_url, plan.base_dir, context.board.state.nonce),
        announce=lambda base_url: runner.send_message(users.WORKLOAD_READY, {"worker": worker, "base_url": base_url}),
    )
    ledger.watch(context.step_running)
    context.shipper.start()


def fit_stop_timeout(environment, timeouts) -> None:
    """The drain outlasts a stream's own deadlines, so a stream waiting for its first token (or its next event) when
    the load stops ends as ``first_token_timeout`` (``idle_timeout``), never ``cancelled``: without --stop-timeout
    Locust waits the longer of the two plus a margin. A --stop-timeout shorter than them is the user's choice, said."""
    needed = max(timeouts.first_token_s, timeouts.idle_s) + STOP_MARGIN_S
    if not environment.parsed_options.stop_timeout:
        environment.stop_timeout = max(DEFAULT_STOP_TIMEOUT_S, needed)
    elif environment.stop_timeout < needed:
        log.warning(
            "--stop-timeout %gs is shorter than the first-token or idle timeout (%gs, %gs): a stream still waiting "
            "when the load stops is recorded as cancelled",
            environment.stop_timeout,
            timeouts.first_token_s,
            timeouts.idle_s,
        )


def _fail(environment, message: str) -> None:
    log.error(message)
    environment.process_exit_code = 2
    if environment.parsed_options.headless:
        environment.runner.quit()
    else:
        environment.runner.stop()


def warn_capacity(environment, load) -> None:
    """A plan this host likely cannot carry, said before the first request with the arithmetic (a master whose
    workers run elsewhere has no count of their cores: nothing said)."""
    processes = getattr(environment.parsed_options, "processes", None) or 0
    if isinstance(getattr(environment, "runner", None), MasterRunner) and not processes:
        return
    cores = os.cpu_count() or 1
    processes = cores if processes == -1 else max(processes, 1)
    for why in capacity_warnings(load, cores, processes, psutil.virtual_memory().available):
        log.warning("this host may not carry the plan: %s", why)


def start_experiment(environment) -> Experiment | None:
    """Called by the shape's first tick of a run (before Locust fires test_start)."""
    state = state_of(environment)
    if state.experiment is not None:
        state.experiment.finish(final=True)
    state.experiment = None
    try:
        if not environment.parsed_options.headless:
            check_web_scenario(environment.parsed_options.scenario, state.cli_scenario)
            # The form's values are in parsed_options now: the baseline always runs, even if a form posted
            # without the page's script left it out.
            environment.parsed_options.variant = with_baseline(environment.parsed_options, environment.host)
        plan = load_plan(environment.parsed_options, environment.host)
        check_dataset(plan)
        check_baseline(plan)
        lock = claim_run_dir(plan, environment.parsed_options.overwrite)
    except ScenarioError as exc:
        _fail(environment, str(exc))
        return None
    warn_capacity(environment, plan.load)
    fit_stop_timeout(environment, plan.load.timeouts)
    classes = {"closed": users.ClosedLoopUser, "open": users.OpenLoopUser}
    state.experiment = state.last = Experiment(environment, plan, classes, clocks=state.clocks, lock=lock)
    log.info("run %s -> %s", plan.run_id, state.experiment.run.path)
    return state.experiment


def on_test_start(environment, **_kw) -> None:
    # A worker that joins a running test gets its first spawn (and this event) while Locust is still creating
    # its runner: wait until the environment has it.
    with gevent.Timeout(RUNNER_WAIT_S, False):
        while environment.runner is None:
            gevent.sleep(0.05)
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
        try:
            experiment.finish(final=False)
        except OSError as exc:  # a full disk: said once more, with the count, when Locust quits (``finished``)
            log.warning(
                "the run directory %s could not be written at the test's stop (%s); tried again when Locust quits",
                experiment.run.path,
                exc.strerror or exc,
            )


def on_quitting(environment, **_kw) -> None:
    state = state_of(environment)
    experiment, state.experiment = state.experiment, None
    if experiment is None:
        return
    run_path = finished(environment, experiment)
    if run_path is None:
        return
    outcome = experiment.outcome
    if outcome is not None:
        # stderr, beside Locust's own tables: stdout stays clean for --json
        print(redact_text(outcome.text), file=sys.stderr)
    print(f"run directory: {run_path}", file=sys.stderr)
    crashed = bool(environment.runner.exceptions) or locust_log.unhandled_greenlet_exception
    if crashed:
        log.error("the load test itself failed (see the exceptions above): Locust's exit code stands")
    elif environment.process_exit_code is None and outcome is not None:
        environment.process_exit_code = outcome.verdict.exit_code


def register(events_hooks) -> None:
    """Attach locust-llm to a set of Locust event hooks (``locust.events`` on import)."""
    mask_log_records()
    events_hooks.init_command_line_parser.add_listener(add_arguments)
    events_hooks.init.add_listener(on_init)
    events_hooks.test_start.add_listener(on_test_start)
    events_hooks.test_stop.add_listener(on_test_stop)
    events_hooks.quitting.add_listener(on_quitting)


register(events)
