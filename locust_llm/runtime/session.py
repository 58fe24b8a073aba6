"""The servers of an experiment: launch (or attach to ``--host``), telemetry and the project's Prometheus, the
greedy consistency prompts and the quality tasks, liveness, and a clean stop. Several may be up at once
(interleaved variants); the load and the telemetry poller follow the active one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gevent.event import Event

from ..client import ledger
from ..client.engines import API_KEY_ENV, PATHS, auth_headers, request_extra, use_key_env
from ..client.greedy import greedy_outputs
from ..client.stream import RequestSpec, StreamingClient
from ..client.tokenizer import counter_for
from ..host.procs import listener_pids
from ..records import RequestRecord
from ..rundir import RunDir, layout, write_json
from ..rundir.consistency import Answer, Consistency, ConsistencyAnswer
from ..rundir.env import ServerEnv
from ..rundir.events import ConsistencySkipped, PrometheusUnavailable, ServerExited
from ..scenario import LoadSpec
from ..servers import ServerError, ServerProcess, context_size, launch_variant, served_model
from ..servers.base import first_model_id, free_port, get_json
from ..telemetry.poller import TelemetryPoller
from ..telemetry.prometheus_server import PrometheusError, PrometheusServer, prometheus_binary
from ..workload import Workload, WorkloadError
from .plan import Plan
from .quality import QualityProbes

log = logging.getLogger(__name__)

__all__ = ["ActiveServer", "ServerError", "ServerSession", "workload_for"]

CONSISTENCY_PROMPTS = 4
CONSISTENCY_MAX_TOKENS = 64
CONSISTENCY_DEADLINE_S = 120.0  # all prompts together: a server that never finishes an answer cannot hold the run
ANSWER = {"text", "tokens", "error"}  # a consistency answer's fields that a repeat keeps


def workload_for(load: LoadSpec, base_url: str, base_dir: Path, nonce: int = 0) -> Workload:
    """The workload of ``base_url``'s server: prompts counted by its tokenizer; conversations and a trace bounded by
    its context (every process asks the server, so every process skips the same records); markers with the run's
    ``nonce``."""
    context = context_size(base_url) if load.conversation is not None or load.trace is not None else None
    return Workload.from_spec(load, counter_for(base_url, load.tokenizer), base_dir, context=context, nonce=nonce)


@dataclass
class ActiveServer:
    variant: str
    base_url: str
    model: str
    process: ServerProcess | None  # None when attached to a server we did not start
    exit_reported: bool = False


class ServerSession:
    def __init__(self, plan: Plan, run: RunDir):
        self.plan = plan
        self.run = run
        self.server: ActiveServer | None = None  # where the load goes now
        self.servers: dict[str, ActiveServer] = {}  # every server that is up, by variant
        self.replicas: list[ServerProcess] = []  # a scale-out step's further servers we launched
        self.local_pids: set[int] = set()  # servers we did not start that run on this machine: their CPU is ours
        self.consistency: dict[str, list[ConsistencyAnswer]] = {}
        self.primers: dict[str, list] = {}  # per server: its shared prefixes as requests (``prime``)
        self.stopping = Event()  # set by interrupt()
        self.nonce = 0  # the run's prompt nonce (the experiment's)
        self.quality = QualityProbes(plan, run)
        self.telemetry = TelemetryPoller(run.path, interval_s=plan.telemetry.interval_s)
        self.prometheus = self._start_prometheus()

    def _start_prometheus(self) -> PrometheusServer | None:
        spec = self.plan.telemetry
        if spec.prometheus == "off" or (spec.prometheus == "auto" and not prometheus_binary()):
            return None
        # Prometheus reads scrape credentials only from its config or a file, and the key never goes to a file:
        # its scrape goes without the key, so with a key "auto" scrapes directly (that request carries it).
        if auth_headers():
            if spec.prometheus == "auto":
                log.info("%s is set: scraping /metrics directly, with the key, not through our Prometheus", API_KEY_ENV)
                return None
            log.warning(
                "our Prometheus scrapes /metrics without %s; if the server protects /metrics, set "
                "telemetry: {prometheus: off} (the direct scrape sends the key)",
                API_KEY_ENV,
            )
        try:
            return PrometheusServer(
                scrape_interval_s=min(spec.interval_s, 1.0),
                dcgm_url=spec.dcgm_url,
                log_path=self.run.file(layout.PROMETHEUS_LOG),
            ).start()
        except PrometheusError as exc:
            log.warning("no Prometheus of our own (%s); scraping /metrics directly", exc)
            self.run.note(PrometheusUnavailable(error=str(exc)))
            return None

    def start(self, variant: str, port: int | None = None) -> ActiveServer:
        """Launch the variant's server (on ``port``: a restart's old one; None: the scenario's) or attach to the
        external one, and make it the active one."""
        plan = self.plan
        if plan.external_url:
            attached = plan.server_of(variant)
            url = attached.url
            use_key_env(url, attached.api_key_env)
            model, owner = served_model(url)
            server = ActiveServer(variant, url, plan.model or attached.model or model, None)
            described = ServerEnv(
                url=url,
                served_model=server.model,
                owned_by=owner,  # what /v1/models says serves it (llamacpp, vllm, sglang, ...)
                launched=False,
                local_pids=self.on_this_host(url),
            )
        else:
            log.info("starting the %s server for variant %s", plan.scenario.server.engine, variant)
            process = launch_variant(plan.scenario, variant, log_dir=self.run.path, port=port)
            server = ActiveServer(variant, process.base_url, plan.model or process.served_model or "", process)
            spec = plan.scenario.speculative(variant)
            described = ServerEnv(
                **process.describe(), launched=True, speculative=spec.model_dump(mode="json") if spec else None
            )
        self.run.env.servers[variant] = described
        described.context_size = context_size(server.base_url)
        self.run.write_env()
        self.servers[variant] = server
        if self.prometheus is not None:
            self.prometheus.add_server(variant, server.base_url)
            self.prometheus.wait_for_target(variant)
        return self.activate(variant)

    def activate(self, variant: str) -> ActiveServer:
        """Send the load to ``variant``'s server (already started) and poll its telemetry."""
        self.server = self.servers[variant]
        self._attach_telemetry(variant)
        return self.server

    def _attach_telemetry(self, variant: str) -> None:
        server, spec = self.server, self.plan.telemetry
        prometheus_url, selector = spec.prometheus_url, None
        if self.prometheus is not None:
            prometheus_url, selector = self.prometheus.url, self.prometheus.selector(variant)
        pid = server.process.proc.pid if server.process is not None and server.process.proc else None
        self.telemetry.attach(
            variant,
            self.plan.engine,
            server.base_url,
            server_pid=pid,
            prometheus_url=prometheus_url,
            dcgm_url=spec.dcgm_url,
            prometheus_selector=selector,
        )

    def start_replicas(self, variant: str, servers: int, urls: list[str]) -> list[str]:
        """Every server of ``variant``'s scale-out steps, the active one first: ``servers - 1`` more launched on free
        ports, or the external replicas ``urls`` (each must answer and serve the active server's model)."""
        primary = self.servers[variant]
        if primary.process is None:
            for url in urls:
                try:
                    status, models = get_json(f"{url}/v1/models")
                except (OSError, ValueError) as exc:
                    raise ServerError(f"scale-out server {url} does not answer: {exc}") from None
                model = first_model_id(models) or ""
                if status != 200 or (not self.plan.model and model != primary.model):
                    raise ServerError(
                        f"scale-out server {url} answers /v1/models with status {status} and model "
                        f"{model!r}; --host serves {primary.model!r}: every server must serve the same "
                        "model"
                    )
            self.run.env.server(variant).replicas = [
                ServerEnv(url=url, launched=False, local_pids=self.on_this_host(url)) for url in urls
            ]
            self.run.write_env()
            return [primary.base_url] + list(urls)
        spec = self.plan.scenario
        for replica in range(1, servers):
            log.info("starting %s server %d of %d for the scale-out steps", variant, replica + 1, servers)
            self.replicas.append(
                launch_variant(spec, variant, log_dir=self.run.path, port=free_port(spec.server.host), replica=replica)
            )
        self.run.env.server(variant).replicas = [ServerEnv(**r.describe(), launched=True) for r in self.replicas]
        self.run.write_env()
        return [primary.base_url] + [r.base_url for r in self.replicas]

    def on_this_host(self, url: str) -> list[int]:
        """The processes serving ``url`` on this machine (none for another one), counted as the run's own CPU."""
        pids = listener_pids(url)
        self.local_pids |= pids
        return sorted(pids)

    def replicas_alive(self) -> bool:
        return all(r.alive() for r in self.replicas)

    def stop_replicas(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self.replicas = []

    def workload(self, base_url: str) -> Workload:
        return workload_for(self.plan.load, base_url, self.plan.base_dir, self.nonce)

    def prime(self, base_urls: list[str]) -> None:
        """``load.shared_prefix``: each shared prefix once to each server, unmeasured, so that the step's window
        finds them in the prompt cache (the load's own request shape, one output token)."""
        load, server = self.plan.load, self.server
        if load.prompt_cache != "shared" or server is None:
            return
        for url in base_urls:
            if url not in self.primers:
                self.primers[url] = self.workload(url).primers()
            client = StreamingClient(url, timeouts=load.timeouts, engine=self.plan.engine)
            try:
                for item in self.primers[url]:
                    record = RequestRecord()
                    extra = request_extra(self.plan.engine, item.max_tokens, load.ignore_eos)
                    ledger.count("shared prefix priming", "POST", url + PATHS[load.api])  # not a measured stream
                    client.stream(RequestSpec.of_item(item, load, server.model, extra), record)
                    if record.error_class:
                        log.warning(
                            "priming shared prefix %s on %s failed: %s", item.prompt_id, url, record.error_message
                        )
            finally:
                client.close()

    def check_consistency(self, variant: str) -> Workload | None:
        """Fixed greedy prompts before the ladder; the analysis compares every variant with the baseline.

        Returns the workload it built (its description goes into env.json), or None when it could not."""
        server, load = self.server, self.plan.load
        self.quality.measure(variant, server.base_url, server.model)  # the scenario's quality tasks, if any
        try:
            workload = self.workload(server.base_url)
        except WorkloadError as exc:
            self.run.note(ConsistencySkipped(variant=variant, error=str(exc)))
            return None
        if "consistency" in self.plan.skipped:
            return workload
        prompts = workload.consistency_prompts(
            CONSISTENCY_PROMPTS, max_tokens=min(load.max_tokens, CONSISTENCY_MAX_TOKENS)
        )

        def ask() -> list[ConsistencyAnswer]:
            return greedy_outputs(
                server.base_url,
                self.plan.engine,
                server.model,
                prompts,
                deadline_s=CONSISTENCY_DEADLINE_S,
                stop=self.stopping,
            )

        answers = ask()
        if variant == self.plan.scenario.baseline_variant:
            # Asked twice: a variant's divergence is a speculative defect only if the baseline repeats itself.
            answers = [
                first.model_copy(update={"repeat": Answer(**second.model_dump(include=ANSWER, exclude_unset=True))})
                for first, second in zip(answers, ask(), strict=True)
            ]
        self.consistency[variant] = answers
        write_json(self.run.file(layout.CONSISTENCY), Consistency(self.consistency).model_dump(exclude_unset=True))
        return workload

    def interrupt(self) -> None:
        """SIGTERM or Ctrl-C: the consistency prompts in flight are abandoned (and recorded as such)."""
        self.stopping.set()

    def alive(self) -> bool:
        server = self.server
        if server is None or server.process is None or server.process.alive():
            return True
        if not server.exit_reported:
            server.exit_reported = True
            tail = server.process.log_tail()
            log.error("the %s server exited during the run; moving on. Log tail:\n%s", server.variant, tail)
            self.run.note(ServerExited(variant=server.variant, log_tail=tail))
        return False

    def stop(self, variant: str | None = None) -> None:
        """Stop ``variant``'s server (default: the active one)."""
        server = self.servers.pop(variant, None) if variant else self.server
        if server is None:
            return
        self.servers.pop(server.variant, None)
        if server is self.server:
            self.telemetry.detach()  # a last sample while the server still answers
            self.server = None
        if self.prometheus is not None:
            self.prometheus.remove_server(server.variant)
        if server.process is not None:
            server.process.stop()

    def stop_all(self) -> None:
        self.stop_replicas()
        self.stop()
        for variant in list(self.servers):
            self.stop(variant)

    def close(self) -> None:
        """Stop every server, write the telemetry files, stop the project's Prometheus; idempotent."""
        self.stop_all()
        self.telemetry.close()
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
