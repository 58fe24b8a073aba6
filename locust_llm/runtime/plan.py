"""Options (command line or web form) + scenario -> ``Plan``: what will run. Pure apart from reading the scenario.

Errors are ``ScenarioError`` with a message that names the option or key and the fix.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import ValidationError

from ..client.engines import API_KEY_ENV
from ..client.transport import header_problem, url_problem
from ..pipeline import missing_baseline
from ..rundir.facts import new_run_id
from ..rundir.lock import LOCK, RunLock, RunLocked
from ..rundir.redact import MASK, remember, secret_name
from ..scenario import (
    CostSpec,
    GatesSpec,
    LoadSpec,
    Scenario,
    ScenarioError,
    TelemetrySpec,
    format_errors,
    load_scenario,
    not_plain,
    valid_name,
)
from ..scenario.scale_out import ScaleOutPlan, scale_out_plan
from ..scenario.soak import SoakPlan, soak_plan
from ..workload import WorkloadError, read_dataset
from ..workload.traces import Trace, read_trace
from .attached import Attached, attach_scenario, attached_servers, variant_urls
from .goodput import goodput_slo
from .options import DEFAULT_SCENARIO, given

__all__ = [
    "DEFAULT_SCENARIO",
    "Block",
    "Plan",
    "capacity_warnings",
    "check_baseline",
    "check_dataset",
    "check_request_inputs",
    "chosen_variants",
    "load_plan",
    "plan_blocks",
    "recordable_options",
    "run_dir_free",
]


TRACE_TAIL_S = 0.5  # a trace step lasts this long after its last record is due


@dataclass(frozen=True)
class Block:
    """One step of one variant: its number, load level, context length (0: the ladder's workload), which
    repeat, and where it sits (group 0 is the ladder, group i the i-th context length; index in its levels)."""

    step: int
    level: float
    context: int
    repeat: int
    group: int
    index: int


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
    soak: SoakPlan | None = None  # ``--soak``: one level of one variant held in windows, instead of the ladder
    scale_out: ScaleOutPlan | None = None  # ``--scale-out N``: one server against N after each variant's ladder
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why it is not run, and how to turn it on
    trace: Trace | None = None  # ``load.trace``: the replayed window; the ladder's levels are its rate x the speeds
    # Servers already running, by variant (``--variant NAME=URL``, or an external scenario's ``url``s): empty when
    # the run launches its servers or attaches to ``--host``.
    attached: dict[str, Attached] = field(default_factory=dict)
    # Every variant would go to the same server (``--host``, or an external scenario with one URL): one is measured.
    one_server: bool = False

    def server_of(self, variant: str) -> Attached:
        """The running server ``variant`` is measured on (``--host`` when there is one)."""
        if self.attached:
            return plan_server(self.attached, variant)
        return Attached(url=(self.external_url or "").rstrip("/"))

    def steady_s(self, level: float) -> float:
        """The steady window of a step at ``level``: the scenario's, or what is left of a trace's replay at that
        speed after the warm-up (plus a moment, so its last record is sent inside the window)."""
        if self.trace is None:
            return self.load.step_duration_s
        return self.trace.span_s * self.trace.rate / level + TRACE_TAIL_S - self.load.warmup_s

    @property
    def engine(self) -> str:
        """The engine the requests go to: ``external`` for a server we did not start."""
        return "external" if self.external_url else self.scenario.server.engine

    @property
    def base_dir(self) -> Path:
        """Where the scenario's relative paths (datasets) are resolved."""
        return self.scenario.source.parent


def plan_server(attached: dict[str, Attached], variant: str) -> Attached:
    """``variant``'s running server; a name the scenario does not list (``--host --variant NAME``) has the first."""
    return attached.get(variant) or next(iter(attached.values()))


def _load_with_options(scenario: Scenario, options) -> LoadSpec:
    """The scenario's load section with the command line's (or web form's) load options applied, validated."""
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
    if options.order:
        if options.order not in ("sequential", "interleaved"):
            raise ScenarioError(f"--order must be 'sequential' or 'interleaved', found {options.order!r}")
        overrides["order"] = options.order
    if options.at_max_concurrency:
        if options.at_max_concurrency not in ("hold", "drop"):
            raise ScenarioError(f"--at-max-concurrency must be 'hold' or 'drop', found {options.at_max_concurrency!r}")
        overrides["at_max_inflight"] = options.at_max_concurrency
    if options.dataset:
        # A path on the command line is the working directory's (the scenario's own are its folder's).
        overrides["dataset"] = str(Path(options.dataset).expanduser().resolve())
    # A number other than the option's default goes to the scenario's own bounds: NaN or -5 is an error there.
    for option, key in (
        ("step_duration", "step_duration_s"),
        ("prompt_tokens", "prompt_tokens"),
        ("max_tokens", "max_tokens"),
        ("repeats", "repeats"),
        ("warmup", "warmup_s"),
        ("min_requests", "min_requests"),
        ("max_concurrency", "max_inflight"),
    ):
        if given(options, option):
            overrides[key] = getattr(options, option)
    try:
        return LoadSpec.model_validate({**scenario.load.model_dump(), **overrides})
    except ValidationError as exc:
        raise ScenarioError(
            "command-line/web-form options are invalid: " + "; ".join(format_errors(exc, LoadSpec, ("load",)))
        ) from None


def _check_servers(external: str | None, servers: list[str], named_by: str) -> None:
    for url in filter(None, [external, *servers]):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ScenarioError(f"{named_by} must be an http(s) URL such as http://127.0.0.1:8000, found {url!r}")


def load_plan(options, host: str | None = None) -> Plan:
    """Scenario plus overrides from ``options`` (Locust's parsed options) and ``host`` (``--host``)."""
    scenario = load_scenario(options.scenario or DEFAULT_SCENARIO)
    variant_option = str(options.variant or "")
    urls = variant_urls(variant_option)
    if urls:
        if host:
            raise ScenarioError(
                "--host names one server and --variant NAME=URL one per variant: give one of them (--variant "
                "baseline=URL,other=URL measures both servers in one interleaved run)"
            )
        scenario, variant_option = attach_scenario(scenario, urls), ""
    attached = {} if host else attached_servers(scenario)
    # One server for every variant (--host, or an external scenario's one URL): one variant is measured.
    one_server = bool(host) or (not urls and bool(attached) and len({server.url for server in attached.values()}) < 2)
    per_variant = bool(attached) and not one_server
    remember_secrets(scenario, host, options.scale_out_urls)
    if options.goodput:
        scenario = scenario.model_copy(update={"slo": goodput_slo(options.goodput)})
    load = _load_with_options(scenario, options)
    trace = check_traffic(scenario, load)
    if trace is not None:
        # The ladder gives speeds; each step's level is the trace's mean rate at that speed (req/s offered), and a
        # step lasts as long as the replay: nothing to extend it with.
        load = load.model_copy(update={"ladder": [s * trace.rate for s in load.ladder], "max_extend_s": 0.0})
    variants = chosen_variants(scenario, variant_option, one_server)
    servers = [plan_server(attached, variant).url for variant in variants] if attached else []
    external = host or (servers[0] if servers else None)
    _check_servers(external, servers, "--variant NAME=URL" if urls else "--host")
    check_request_inputs(
        [external, *servers, *options.scale_out_urls.split(","), *scenario.scale_out.urls],
        [server.api_key_env for server in attached.values()],
    )
    run_id = options.run_id or new_run_id(scenario.name)
    if not valid_name(run_id):
        raise ScenarioError(not_plain("--run-id", run_id) + ": it names a folder inside --report-dir")
    try:
        named = ",".join(urls) if urls else str(options.variant)
        soak = soak_plan(options.soak, options.soak_level, scenario.soak, load.ladder, variants, named)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    variants = [soak.variant] if soak else variants
    try:
        scale_out = scale_out_plan(
            scenario.scale_out,
            options.scale_out if given(options, "scale_out") else None,
            options.scale_out_urls,
            load.ladder,
            external,
        )
    except ValueError as exc:
        raise ScenarioError(f"{exc} ({scenario.source})") from None
    if per_variant and scale_out is not None:
        raise ScenarioError(
            "--scale-out with a running server per variant: the replicas (--scale-out-urls) are those of one server "
            "(--host); measure the scale-out of each server in a run of its own"
        )
    if trace is not None and (soak is not None or scale_out is not None):
        raise ScenarioError(
            "load.trace replays a window of the trace at the ladder's speeds; --soak and --scale-out hold levels of "
            "their own: run them separately"
        )
    if scale_out is not None and soak is not None:
        raise ScenarioError(
            "--soak holds one level, --scale-out follows a ladder: run them separately (turn "
            "scale_out off with --scale-out 0)"
        )
    telemetry = scenario.telemetry
    gate_overrides = {
        key: getattr(options, option)
        for option, key in (
            ("slo_ttft_p99_ms", "ttft_p99_ms"),
            ("slo_tpot_p99_ms", "tpot_p99_ms"),
            ("slo_error_rate", "error_rate"),
            ("max_regression_pct", "max_regression_pct"),
            ("baseline_run", "baseline_run"),
        )
        if given(options, option)
    }
    try:
        gates = GatesSpec.model_validate({**scenario.gates.model_dump(), **gate_overrides})
    except ValidationError as exc:
        raise ScenarioError(
            "gate options are invalid: " + "; ".join(format_errors(exc, GatesSpec, ("gates",)))
        ) from None
    if gates.library:  # the scenario's own folder anchors it, never the working directory
        gates = gates.model_copy(update={"library": str(scenario.resolve_path(gates.library))})
    skipped = {}
    if urls and not given(options, "scenario"):
        # The built-in scenario's quality tasks and price are its tiny CPU pair's, not the user's servers'.
        skipped = {check: why for check, why in VARIANT_URL_SKIPS.items() if getattr(scenario, check)}
        scenario = scenario.model_copy(update={"cost": None, "quality": None})
    if host and not given(options, "scenario"):
        # The built-in scenario's quality tasks and price are its tiny CPU pair's, not the user's server's.
        skipped = {
            check: why for check, why in HOST_SKIPS.items() if check == "consistency" or getattr(scenario, check)
        }
        scenario = scenario.model_copy(update={"cost": None})
    if given(options, "gpu_hour_usd"):
        skipped.pop("cost", None)
        cost = {**(scenario.cost.model_dump() if scenario.cost else {}), "gpu_hour_usd": options.gpu_hour_usd}
        try:
            scenario = scenario.model_copy(update={"cost": CostSpec.model_validate(cost)})
        except ValidationError as exc:
            raise ScenarioError(
                "--gpu-hour-usd is invalid: " + "; ".join(format_errors(exc, CostSpec, ("cost",)))
            ) from None
    if options.prometheus_url:
        telemetry = telemetry.model_copy(update={"prometheus_url": options.prometheus_url, "prometheus": "off"})
    if options.probes:
        scenario = scenario.model_copy(update={"probes": scenario.probes.model_copy(update={"enabled": True})})
    return Plan(
        skipped=skipped,
        scenario=scenario,
        load=load,
        telemetry=telemetry,
        gates=gates,
        variants=variants,
        external_url=external,
        model=options.model,
        report_dir=Path(options.report_dir),
        run_id=run_id,
        options=recordable_options(options),
        soak=soak,
        scale_out=scale_out,
        trace=trace,
        attached=attached,
        one_server=one_server,
    )


# What one load-process core carries, beyond which a plan is warned about before it starts: one process ingests about
# 20,000 tokens/s before its core is full (benchmarks/client_overhead.py, docs/distributed.md); a closed user streams
# at least some 20 tokens/s from any real server, so 1,000 users fill a core; and a user is a greenlet with its
# connection and parser, about 20 KiB resident (100,000 users took 2 GB on a 2-core host, none of them measured).
INGEST_TOKENS_PER_CORE = 20_000
USERS_PER_CORE = 1000
BYTES_PER_USER = 20 << 10


def capacity_warnings(load: LoadSpec, cores: int, processes: int, memory_bytes: int) -> list[str]:
    """Why this host likely cannot carry the plan (said before the first request, with the arithmetic); empty when
    it can. ``processes``: the load processes asked for (``--processes``; 1 without), ``cores``: this host's."""
    out = []
    if processes > cores:
        out.append(
            f"--processes {processes} on {cores} cores: {processes / cores:.1f} load processes per core; they run as "
            "asked but share the cores, so each falls behind sooner (the client-validity check marks the steps where "
            f"they did, and a process too slow to answer its heartbeat is declared lost); at most {cores} measures more"
        )
    peak = max(load.ladder)
    usable = max(min(processes, cores), 1)
    if load.mode == "closed":
        if peak / usable > USERS_PER_CORE:
            out.append(
                f"the ladder's peak of {peak:g} users on {usable} load core(s) is {peak / usable:,.0f} users per core, "
                f"above the {USERS_PER_CORE:,} one core streams on time ({INGEST_TOKENS_PER_CORE:,} tokens/s): "
                "expect client-invalid steps; spread the load over more cores or hosts (docs/distributed.md)"
            )
        need = peak * BYTES_PER_USER
        if need > memory_bytes / 2:
            out.append(
                f"{peak:g} users need about {need / 2**30:.1f} GiB ({BYTES_PER_USER >> 10} KiB each), more than half "
                f"of this host's {memory_bytes / 2**30:.1f} GiB available; lower the ladder"
            )
    else:
        tokens = peak * load.max_tokens / usable
        if tokens > INGEST_TOKENS_PER_CORE:
            out.append(
                f"the ladder's peak of {peak:g} req/s x {load.max_tokens} output tokens on {usable} load core(s) is "
                f"{tokens:,.0f} tokens/s per core, above the {INGEST_TOKENS_PER_CORE:,} one core ingests: expect "
                "late arrivals (schedule lag) and a long count of prompt tokens after each step; lower the rate or "
                "add cores"
            )
    return out


def check_baseline(plan: Plan) -> None:
    """``--baseline-run`` names a saved run: a missing one is found out before the first request, not after the run."""
    why = missing_baseline(plan.gates)
    if why:
        raise ScenarioError(why)


def check_traffic(scenario: Scenario, load: LoadSpec) -> Trace | None:
    """Read a trace before anything starts: a malformed file is an error naming the file, the line and the field
    (a dataset, conversations' too, is read by ``check_dataset``). Returns the trace's replayed window."""
    if load.trace is None:
        return None
    try:
        trace = read_trace(load.trace, scenario.resolve_path(load.trace.path))
    except WorkloadError as exc:
        raise ScenarioError(f"{exc} (load.trace of {scenario.source})") from None
    for speed in load.ladder:
        replay = trace.span_s / speed + TRACE_TAIL_S
        if replay <= load.warmup_s:
            raise ScenarioError(
                f"load.warmup_s ({load.warmup_s:g} s) is longer than the trace's replay at speed {speed:g} "
                f"({replay:.2f} s): nothing would be measured; lower warmup_s or the speed"
            )
    return trace


# ``--host`` without ``--scenario``: checks that could not be judged there are not run (and so send nothing).
HOST_SKIPS = {
    "quality": (
        "quality check skipped: --host without --scenario measures one server, with no baseline to compare its "
        "answers with, and the built-in task set is made for the tiny generated models; to run it, give --scenario "
        "with a quality: section whose tasks suit your model"
    ),
    "consistency": (
        "consistency check skipped: it compares each variant's greedy answers with the baseline's, and --host "
        "without --scenario runs one; to run it (its 4 greedy prompts go to the server before the ladder), give "
        "--scenario, e.g. scenarios/external.yaml"
    ),
    "cost": (
        "cost per million tokens skipped: the built-in scenario's price is an example for its own small CPU host; "
        "give --gpu-hour-usd, or --scenario with a cost: section, to price your server"
    ),
}


# ``--variant NAME=URL`` without ``--scenario``: the built-in scenario's checks that do not suit the user's servers.
VARIANT_URL_SKIPS = {
    "quality": (
        "quality check skipped: the built-in task set is made for the tiny generated models, not your servers'; "
        "to run it, give --scenario with a quality: section whose tasks suit your model"
    ),
    "cost": HOST_SKIPS["cost"],
}


def check_request_inputs(urls: list[str | None], key_envs: Collection[str] = (API_KEY_ENV,)) -> None:
    """What goes into every request's head must be sendable as it is: the API key (no control character, which
    would end its header and start another one, and latin-1 only) and the servers' URLs (no space or control
    character, which would end the request line). Checked before the first request: a request that cannot be
    built is not sent over and over."""
    for name in {API_KEY_ENV, *key_envs}:
        key = os.environ.get(name)
        if key and (why := header_problem(name, key)):
            raise ScenarioError(f"{why}; set it to the key alone, on one line")
    for url in filter(None, (u.strip() for u in urls if u)):
        if why := url_problem(url):
            raise ScenarioError(f"--host (or a server URL): {why}")
        if why := query_problem(url):
            raise ScenarioError(f"--host (or a server URL): {why}")


def query_problem(url: str) -> str | None:
    """Why a query or fragment in a server URL is refused (None without one): every request joins its own path to
    the URL (``/v1/completions``, ``/metrics``, ``/tokenize``), so a query could not ride on each of them. The message
    masks the values of secret-looking names (``?api_key=***``)."""
    parts = urlsplit(url)
    if not parts.query and not parts.fragment:
        return None
    masked = "&".join(
        f"{name}={MASK}" if secret_name(name) and eq else f"{name}{eq}{value}"
        for name, eq, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    netloc = parts.netloc.replace(f":{parts.password}@", f":{MASK}@", 1) if parts.password else parts.netloc
    shown = parts._replace(netloc=netloc, query=masked, fragment="..." if parts.fragment else "").geturl()
    what = "a query" if parts.query else "a fragment"
    return (
        f"{shown} carries {what}, which would be lost or misplaced when the run joins its paths "
        f"(/v1/completions, /metrics, /tokenize) to the URL: refused; give the server's base URL alone, and an API key "
        f"with {API_KEY_ENV} (sent as Authorization: Bearer)"
    )


def check_dataset(plan: Plan) -> None:
    """The dataset the load will send, read once at the start: a missing, empty or unreadable file, a directory or
    a bad line (file:line:column) refuses the run before any request, instead of failing every request."""
    if not plan.load.dataset:
        return
    path = Path(plan.load.dataset).expanduser()
    try:
        read_dataset(path if path.is_absolute() else plan.base_dir / path)
    except WorkloadError as exc:
        raise ScenarioError(f"load.dataset: {exc}") from None


def chosen_variants(scenario: Scenario, option: str, external: bool) -> list[str]:
    """``--variant`` (one name or a comma list) -> the variants to run, baseline first, in the scenario's order."""
    chosen = [name.strip() for name in option.split(",") if name.strip()]
    if external:
        if len(chosen) > 1:
            raise ScenarioError(f"--host attaches to one server: give --variant one name, found {option!r}")
        if chosen and not valid_name(chosen[0]):  # it names the server's log and labels its metrics
            raise ScenarioError(not_plain("--variant", chosen[0]) + ": it names the server's log and metrics")
        return chosen or [scenario.baseline_variant if scenario.server.engine == "external" else "external"]
    unknown = [name for name in chosen if name not in scenario.variants]
    if unknown:
        raise ScenarioError(
            f"--variant {', '.join(map(repr, unknown))} is not in {scenario.source}; "
            f"choose from: {', '.join(scenario.variants)}"
        )
    baseline = scenario.baseline_variant
    ordered = [baseline] + [v for v in scenario.variants if v != baseline]
    return [v for v in ordered if not chosen or v in chosen]


def plan_blocks(load: LoadSpec, too_long: Collection[int] = ()) -> list[Block]:
    """Every block of a variant's run, in step order: the ladder ``repeats`` times, then per context length its
    levels ``repeats`` times (lengths a server cannot hold left out). Step numbers are the same in every
    variant, so block r of one variant pairs with block r of another."""
    groups = [(0, list(load.ladder))] + [
        (n, list(load.context_levels or load.ladder)) for n in load.context_tokens if n not in too_long
    ]
    out, base = [], 0
    for group, (context, levels) in enumerate(groups):
        for repeat in range(load.repeats):
            for index, level in enumerate(levels):
                out.append(Block(base + repeat * len(levels) + index, level, context, repeat, group, index))
        base += load.repeats * len(levels)
    return out


def run_dir_free(plan: Plan, overwrite: bool) -> bool:
    """True when the run's folder is new or empty (a lock aside); False when ``overwrite`` allows replacing it; else
    the error."""
    path = plan.report_dir / plan.run_id
    if not (path.is_dir() and any(p.name != LOCK for p in path.iterdir())):
        return True
    if not overwrite:
        raise ScenarioError(
            f"run directory {path} exists already; choose another --run-id, or pass --overwrite to replace it"
        )
    return False


def claim_run_dir(plan: Plan, overwrite: bool) -> RunLock:
    """The run's folder must be new (parts of an earlier attempt would be merged into this one), writable, and not
    being written by another run (``--overwrite`` included): its lock is taken first, and held for the run."""
    path = plan.report_dir / plan.run_id
    lock = RunLock(path)
    try:
        lock.acquire()
        if not run_dir_free(plan, overwrite):
            for child in path.iterdir():
                if child.name == LOCK:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except RunLocked as exc:
        raise ScenarioError(f"{exc}; choose another --run-id (--overwrite never replaces a run in progress)") from None
    except OSError as exc:
        lock.release()
        raise ScenarioError(
            f"cannot write the run directory {path}: {exc.strerror or exc}; choose a writable --report-dir"
        ) from None
    except ScenarioError:
        lock.release()
        raise
    return lock


def remember_secrets(scenario: Scenario, host: str | None, scale_out_urls: str = "") -> None:
    """Every secret this run knows of, so that no file it writes shows one (``rundir.redact``)."""
    variants = scenario.variants.values()
    values = [os.environ.get(API_KEY_ENV)] + [os.environ.get(v.api_key_env) for v in variants if v.api_key_env]
    own_urls = [v.url for v in variants]
    for url in (host, scenario.server.url, *own_urls, *scenario.scale_out.urls, *scale_out_urls.split(",")):
        parts = urlsplit(url or "")
        values.append(parts.password)  # a username is not a secret: "http://alice:***@host" names who asked
    for env in [scenario.server.env] + [v.env for v in scenario.variants.values()]:
        values += [value for key, value in env.items() if secret_name(key)]
    for args in [scenario.server.args] + [v.args for v in scenario.variants.values()]:
        for flag, value in zip(args, args[1:] + [""], strict=False):
            name, eq, inline = flag.partition("=")
            if flag.startswith("-") and secret_name(name):
                values.append(inline if eq else value)
    remember(*values)


def recordable_options(options) -> dict:
    """The command line as env.json records it: plain values only, and nothing that may hold a secret."""
    return {
        k: v
        for k, v in vars(options).items()
        if not secret_name(k) and (v is None or isinstance(v, (str, int, float, bool, list)))
    }
