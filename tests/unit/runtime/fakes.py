"""Stand-ins for Locust's runner and for the server session, so the runtime runs without a server."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass, field

from locust_llm.rundir.events import ServerExited
from locust_llm.runtime.options import defaults
from locust_llm.runtime.session import ActiveServer


def options(**given) -> Namespace:
    """Parsed options as Locust hands them over, with the plugin's defaults."""
    return Namespace(**{**defaults(), "headless": True, "stop_timeout": 0, **given})


class Clock:
    """A run clock that moves only when read: each read advances it by ``step`` seconds."""

    def __init__(self, start: float = 1000.0, step: float = 0.25):
        self.t, self.step = start, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@dataclass
class FakeRunner:
    user_count: int = 0
    messages: list = field(default_factory=list)
    users_at_message: list = field(default_factory=list)
    built_for: dict | None = None  # an experiment's ``ready``: see ``prompts_built_at_once``

    def send_message(self, name: str, data: dict) -> None:
        self.messages.append((name, data))
        self.users_at_message.append(self.user_count)
        if self.built_for is not None and data.get("base_url"):
            self.built_for.setdefault(data["base_url"], set()).add(0)


def prompts_built_at_once(experiment):
    """The one load process builds its prompts for a server the moment a step message names it, and says so (as
    ``runtime.plugin.on_workload_ready`` hears it), so that no step waits for them."""
    experiment.environment.runner.built_for = experiment.ready
    return experiment


@dataclass
class FakeEnvironment:
    runner: FakeRunner = field(default_factory=FakeRunner)
    stop_timeout: float = 5.0


class FakeTelemetry:
    """A server that exports nothing; counts the flushes a soak asks for after each window."""

    def __init__(self):
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1

    def live_figures(self, variant: str) -> dict:
        return {"acceptance": None, "acceptance_gauge": None, "kv_cache_usage": None}


class FakeSession:
    """Starts nothing: every variant's server is 'up' at a made-up URL until ``die_after`` alive checks."""

    def __init__(self, plan, run, die_after: int | None = None, fail_start: tuple = (), fail_replicas: bool = False):
        self.plan, self.run = plan, run
        self.fail_replicas = fail_replicas
        self.replicas: list[str] = []  # the scale-out's further servers, while they are up
        self.local_pids: set[int] = set()
        self.replicas_started: list[tuple[str, list[str]]] = []
        self.telemetry = FakeTelemetry()
        self.server: ActiveServer | None = None
        self.servers: dict[str, ActiveServer] = {}
        self.started: list[str] = []
        self.activated: list[str] = []
        self.die_after, self.fail_start = die_after, fail_start
        self.checks = 0
        self.primed: list[tuple] = []  # (the step being set up, the servers primed)

    def start(self, variant: str) -> ActiveServer:
        from locust_llm.servers import ServerError

        if variant in self.fail_start:
            raise ServerError(f"{variant} would not start")
        self.started.append(variant)
        self.servers[variant] = ActiveServer(variant, f"http://127.0.0.1:1/{variant}", "m", None)
        return self.activate(variant)

    def activate(self, variant: str) -> ActiveServer:
        self.activated.append(variant)
        self.server = self.servers[variant]
        return self.server

    def check_consistency(self, variant: str):
        return None

    def prime(self, base_urls: list[str]) -> None:
        self.primed.append((self.run.steps[-1].step if self.run.steps else None, list(base_urls)))

    def interrupt(self) -> None:
        pass

    def alive(self) -> bool:
        self.checks += 1
        if self.die_after is not None and self.checks > self.die_after:
            if not any(isinstance(e, ServerExited) for e in self.run.events):
                self.run.note(ServerExited(variant=self.server.variant, log_tail=""))
            return False
        return True

    def stop(self, variant: str | None = None) -> None:
        server = self.servers.pop(variant or (self.server.variant if self.server else ""), None)
        if server is not None and server is self.server:
            self.server = None

    def start_replicas(self, variant: str, servers: int, urls: list[str]) -> list[str]:
        from locust_llm.servers import ServerError

        if self.fail_replicas:
            raise ServerError("scale-out server http://127.0.0.1:9 does not answer")
        self.replicas = urls or [f"http://127.0.0.1:{2 + i}/{variant}" for i in range(servers - 1)]
        self.replicas_started.append((variant, list(self.replicas)))
        return [self.servers[variant].base_url] + self.replicas

    def replicas_alive(self) -> bool:
        return True

    def stop_replicas(self) -> None:
        self.replicas = []

    def stop_all(self) -> None:
        self.stop_replicas()
        self.servers.clear()
        self.server = None

    def close(self) -> None:
        self.stop_all()
