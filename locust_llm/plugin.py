"""Wires locust-llm into Locust: custom arguments, messages between processes, run start and end.

Importing this module registers the listeners; ``locustfiles/spec_decode.py`` does that and
exposes the user classes and the ladder shape.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from locust import events
from locust.runners import MasterRunner, WorkerRunner

from . import users, webui
from .client import Timeouts
from .experiment import Experiment, Plan
from .recorder import RECORDS_MESSAGE, RecordShipper
from .records import now
from .rundir import new_run_id
from .scenario import ScenarioError, load_scenario
from .steps import STEP_MESSAGE, StepState
from .workload import Workload, counter_for

log = logging.getLogger(__name__)

DEFAULT_SCENARIO = "scenarios/tiny-cpu.yaml"
DEFAULT_STOP_TIMEOUT_S = 60.0


def add_arguments(parser) -> None:
    group = parser.add_argument_group("locust-llm", "LLM load test (empty or 0 means: take it from the scenario)")
    group.add_argument("--scenario", type=str, default=DEFAULT_SCENARIO, help="scenario YAML file")
    group.add_argument("--variant", type=str, default="", help="run only this variant (default: all, baseline first)")
    group.add_argument("--mode", type=str, default="", help="closed (users) or open (arrival rate)")
    group.add_argument("--ladder", type=str, default="", help="comma list: users (closed) or req/s (open)")
    group.add_argument("--step-duration", type=float, default=0.0, help="steady window per step, seconds")
    group.add_argument("--warmup", type=float, default=-1.0, help="warm-up per step, seconds (recorded, excluded)")
    group.add_argument("--prompt-tokens", type=int, default=0, help="prompt length in tokens")
    group.add_argument("--max-tokens", type=int, default=0, help="output length in tokens")
    group.add_argument("--api", type=str, default="", help="completions or chat")
    group.add_argument("--model", type=str, default="", help="model name to request (default: the server's)")
    group.add_argument("--report-dir", type=str, default="reports", help="where run directories are written")
    group.add_argument("--run-id", type=str, default="", help="run directory name (default: time + scenario)")
    group.add_argument("--slo-ttft-p99-ms", type=float, default=0.0, help="gate: P99 TTFT per step (0: scenario's)")
    group.add_argument("--slo-tpot-p99-ms", type=float, default=0.0, help="gate: P99 TPOT per step (0: scenario's)")
    group.add_argument("--slo-error-rate", type=float, default=-1.0,
                       help="gate: error rate per step, 0..1 (negative: scenario's)")
    group.add_argument("--max-regression-pct", type=float, default=-1.0,
                       help="gate: worst change vs the baseline run, percent (negative: scenario's)")
    group.add_argument("--baseline-run", type=str, default="", help="saved baseline run to compare against")
    group.add_argument("--prometheus-url", type=str, default="",
                       help="query this Prometheus for server/GPU metrics (default: scrape /metrics directly)")


def load_plan(environment) -> Plan:
    """Scenario plus overrides from the command line or the web form; errors name what to fix."""
    options = environment.parsed_options
    scenario = load_scenario(options.scenario or DEFAULT_SCENARIO)
    overrides = {}
    if options.mode:
        if options.mode not in ("closed", "open"):
            raise ScenarioError(f"--mode must be 'closed' or 'open', found {options.mode!r}")
        overrides["mode"] = options.mode
    if options.ladder:
        try:
            overrides["ladder"] = [float(v) for v in str(options.ladder).split(",") if v.strip()]
        except ValueError:
            raise ScenarioError(f"--ladder must be a comma list of numbers, found {options.ladder!r}") from None
    if options.api:
        overrides["api"] = options.api
    for option, key in (("step_duration", "step_duration_s"), ("prompt_tokens", "prompt_tokens"),
                        ("max_tokens", "max_tokens")):
        if getattr(options, option):
            overrides[key] = getattr(options, option)
    if options.warmup >= 0:
        overrides["warmup_s"] = options.warmup
    try:
        load = type(scenario.load).model_validate({**scenario.load.model_dump(), **overrides})
    except ValueError as exc:
        raise ScenarioError(f"command-line/web-form overrides are invalid: {exc}") from None
    external = environment.host or (scenario.server.url if scenario.server.engine == "external" else None)
    if options.variant and not external and options.variant not in scenario.variants:
        raise ScenarioError(f"--variant {options.variant!r} is not in {scenario.source}; "
                            f"choose one of: {', '.join(scenario.variants)}")
    if options.variant:
        variants = [options.variant]
    elif external:
        variants = [scenario.baseline_variant if scenario.server.engine == "external" else "external"]
    else:
        baseline = scenario.baseline_variant
        variants = [baseline] + [v for v in scenario.variants if v != baseline]
    telemetry = scenario.telemetry
    gate_overrides = {key: value for key, value, given in (
        ("ttft_p99_ms", options.slo_ttft_p99_ms, options.slo_ttft_p99_ms > 0),
        ("tpot_p99_ms", options.slo_tpot_p99_ms, options.slo_tpot_p99_ms > 0),
        ("error_rate", options.slo_error_rate, options.slo_error_rate >= 0),
        ("max_regression_pct", options.max_regression_pct, options.max_regression_pct >= 0),
        ("baseline_run", options.baseline_run, bool(options.baseline_run))) if given}
    try:
        gates = type(scenario.gates).model_validate({**scenario.gates.model_dump(), **gate_overrides})
    except ValueError as exc:
        raise ScenarioError(f"gate options are invalid: {exc}") from None
    if options.prometheus_url:
        telemetry = telemetry.model_copy(update={"prometheus_url": options.prometheus_url, "prometheus": "off"})
    return Plan(scenario=scenario, load=load, telemetry=telemetry, gates=gates, variants=variants,
                external_url=external, model=options.model, report_dir=Path(options.report_dir),
                run_id=options.run_id or new_run_id(scenario.name), options=recordable_options(options))


SECRET_OPTION = re.compile(r"auth|pass|secret|token|key|cert", re.IGNORECASE)


def recordable_options(options) -> dict:
    """The command line as env.json records it: plain values only, and nothing that may hold a secret."""
    return {k: v for k, v in vars(options).items()
            if not SECRET_OPTION.search(k) and (v is None or isinstance(v, (str, int, float, bool, list)))}


def on_step_message(environment, msg, **_kw) -> None:
    context = users.context_of(environment)
    state = StepState(**msg.data)
    context.board.update(state, now())
    if state.base_url and context.workload_factory is not None:
        # Tokenizing the prompt set takes a moment: start it as soon as the server is known.
        context.prepare(state.base_url)


def experiment_of(environment) -> Experiment | None:
    """The experiment this (master or local) environment is running, if any."""
    return getattr(environment, "llm_experiment", None)


def live_rows(environment) -> list[dict]:
    experiment = experiment_of(environment) or getattr(environment, "llm_last_experiment", None)
    return experiment.recorder.live.rows() if experiment is not None else []


def last_report(environment) -> Path | None:
    experiment = experiment_of(environment) or getattr(environment, "llm_last_experiment", None)
    path = experiment.run.file("report.html") if experiment is not None else None
    return path if path is not None and path.exists() else None


def on_records_message(environment, msg, **_kw) -> None:
    experiment = experiment_of(environment)
    if experiment is not None:
        experiment.recorder.on_batch(msg.data)


def on_init(environment, runner=None, **_kw) -> None:
    if runner is None:
        return
    if not isinstance(runner, WorkerRunner):
        runner.register_message(RECORDS_MESSAGE, on_records_message)
    if not isinstance(runner, MasterRunner):
        runner.register_message(STEP_MESSAGE, on_step_message)
    if not isinstance(runner, WorkerRunner):
        webui.install(environment, rows=lambda: live_rows(environment), report_path=lambda: last_report(environment))
    if not environment.stop_timeout:
        # Stepping down or switching variants lets streams in flight finish instead of killing them.
        environment.stop_timeout = DEFAULT_STOP_TIMEOUT_S


def _setup_load_process(environment) -> None:
    """Worker side: what the users of this process share for the run."""
    runner = environment.runner
    worker = max(getattr(runner, "worker_index", 0), 0)
    plan = load_plan(environment)
    load = plan.load
    engine = "external" if plan.external_url else plan.scenario.server.engine
    base_dir = plan.scenario.source.parent
    t = load.timeouts
    context = users.context_of(environment)
    context.configure(
        worker=worker, engine=engine, timeouts=Timeouts(t.connect_s, t.first_token_s, t.idle_s, t.total_s),
        temperature=load.temperature, ignore_eos=load.ignore_eos, think_time_s=load.think_time_s,
        max_inflight=load.max_inflight, arrival=load.arrival, burstiness=load.burstiness, api=load.api,
        shipper=RecordShipper(runner, worker),
        workload_factory=lambda base_url: Workload.from_spec(load, counter_for(base_url), base_dir))
    context.shipper.start()


def _fail(environment, message: str) -> None:
    log.error(message)
    environment.process_exit_code = 2
    if environment.parsed_options.headless:
        environment.runner.quit()
    else:
        environment.runner.stop()


def start_experiment(environment) -> Experiment | None:
    """Called by the shape's first tick of a run (before Locust fires test_start)."""
    previous = experiment_of(environment)
    if previous is not None:
        previous.finish(final=True)
    environment.llm_experiment = None
    try:
        plan = load_plan(environment)
    except ScenarioError as exc:
        _fail(environment, str(exc))
        return None
    classes = {"closed": users.ClosedLoopUser, "open": users.OpenLoopUser}
    environment.llm_experiment = environment.llm_last_experiment = Experiment(environment, plan, classes)
    log.info("run %s -> %s", plan.run_id, environment.llm_experiment.run.path)
    return environment.llm_experiment


def on_test_start(environment, **_kw) -> None:
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
    experiment = experiment_of(environment)
    if experiment is not None:
        experiment.finish(final=False)


def on_quitting(environment, **_kw) -> None:
    experiment = experiment_of(environment)
    environment.llm_experiment = None
    if experiment is not None:
        path = experiment.finish(final=True)
        # stderr, beside Locust's own tables: stdout stays clean for --json
        print(experiment.verdict["text"], file=sys.stderr)
        print(f"run directory: {path.parent}", file=sys.stderr)
        if environment.process_exit_code is None:
            environment.process_exit_code = experiment.verdict["exit_code"]


def register(events_hooks) -> None:
    """Attach locust-llm to a set of Locust event hooks (``locust.events`` on import)."""
    events_hooks.init_command_line_parser.add_listener(add_arguments)
    events_hooks.init.add_listener(on_init)
    events_hooks.test_start.add_listener(on_test_start)
    events_hooks.test_stop.add_listener(on_test_stop)
    events_hooks.quitting.add_listener(on_quitting)


register(events)
