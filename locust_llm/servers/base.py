"""Start, health-check and stop one inference server process; engines only say how to build the command."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ..client import control
from ..host.procs import log_tail, start_child, stop_group
from ..rundir.layout import redact_file
from ..rundir.redact import redact_args
from ..scenario import Scenario

__all__ = [
    "LaunchPlan",
    "PortInUseError",
    "ServerError",
    "ServerProcess",
    "assemble_plan",
    "context_size",
    "find_executable",
    "first_model_id",
    "free_port",
    "get_json",
    "resolve_port",
    "served_model",
]


class ServerError(RuntimeError):
    """The server could not be started or reached; the message carries the reason and the log tail."""


class PortInUseError(ServerError):
    pass


@dataclass
class LaunchPlan:
    """Everything needed to start one variant's server, fixed before anything runs."""

    engine: str
    variant: str
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    version_argv: list[str] | None = None
    model: str | None = None
    notes: dict[str, str] = field(default_factory=dict)
    nice: int = 0
    # Model files with a known checksum and provenance (``realmodel.ModelFile`` as dicts): env.json records them.
    model_files: list[dict] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on {host} is already in use ({exc.strerror}); stop whatever "
                "listens there or choose another port (or none for a free one)"
            ) from None


def find_executable(name: str, hint: str) -> str:
    path = shutil.which(name) if os.sep not in name else (name if os.access(name, os.X_OK) else None)
    if path is None:
        raise ServerError(f"server executable {name!r} not found; {hint}")
    return path


_RUNNING: set[ServerProcess] = set()


def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


atexit.register(_stop_all)


class ServerProcess:
    """One launched server: log capture, health wait, clean stop of its whole process group."""

    def __init__(self, plan: LaunchPlan, log_path: Path, startup_timeout_s: float = 300.0, stop_grace_s: float = 10.0):
        self.plan = plan
        self.log_path = Path(log_path)
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.proc: subprocess.Popen | None = None
        self.version: str | None = None
        self.served_model: str | None = None
        self.started_at: float | None = None

    @property
    def base_url(self) -> str:
        return self.plan.base_url

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def read_version(self) -> str | None:
        if not self.plan.version_argv:
            return None
        try:
            out = subprocess.run(
                self.plan.version_argv, capture_output=True, text=True, timeout=60, env={**os.environ, **self.plan.env}
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unknown ({exc})"
        return (out.stdout + out.stderr).strip()[-2000:] or None

    def start(self) -> ServerProcess:
        check_port_free(self.plan.host, self.plan.port)
        self.version = self.read_version()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        log.write(f"$ {' '.join(redact_args(self.plan.argv))}\n".encode())
        log.flush()
        try:
            self.proc = subprocess.Popen(
                self.plan.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.plan.env},
                start_new_session=True,
                preexec_fn=partial(start_child, self.plan.nice),
            )
        except OSError as exc:
            raise ServerError(f"could not start {self.plan.argv[0]!r}: {exc}") from None
        finally:
            log.close()
        _RUNNING.add(self)
        self.started_at = time.time()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerError(
                    f"{self.plan.engine} server for variant {self.plan.variant!r} exited with code "
                    f"{self.proc.returncode} during start-up. Last log lines ({self.log_path}):\n"
                    f"{self.log_tail()}"
                )
            try:
                status, _ = get_json(f"{self.base_url}/health", timeout_s=5)
                if status == 200:
                    status, models = get_json(f"{self.base_url}/v1/models", timeout_s=5)
                    if status == 200:
                        self.served_model = first_model_id(models)
                        return
                    last = f"/v1/models answered {status}"
                else:
                    last = f"/health answered {status}"
            except (OSError, ValueError) as exc:
                last = type(exc).__name__
            time.sleep(0.25)
        raise ServerError(
            f"{self.plan.engine} server for variant {self.plan.variant!r} was not healthy after "
            f"{self.startup_timeout_s:.0f} s ({last}). Last log lines ({self.log_path}):\n"
            f"{self.log_tail()}"
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period; idempotent."""
        _RUNNING.discard(self)
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_group(proc, self.stop_grace_s)
        redact_file(self.log_path)  # servers print their own arguments, secrets included

    def describe(self) -> dict:
        return {
            "engine": self.plan.engine,
            "variant": self.plan.variant,
            "command": self.plan.argv,
            "url": self.base_url,
            "version": self.version,
            "served_model": self.served_model,
            "model": self.plan.model,
            "log": str(self.log_path),
            "notes": self.plan.notes,
            "nice": self.plan.nice,
            "model_files": self.plan.model_files or None,
        }

    def __enter__(self) -> ServerProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def assemble_plan(
    scenario: Scenario,
    variant: str,
    engine: str,
    port: int,
    head: list[str],
    served_name_flag: str,
    speculative_args: list[str],
    version_argv: list[str],
    model: str | None,
) -> LaunchPlan:
    """The one order of flags for every engine: engine command, server-wide args, speculation, variant args.

    Variant args come last so a variant can override a server-wide flag.
    """
    server = scenario.server
    argv = list(head)
    if server.served_model_name:
        argv += [served_name_flag, server.served_model_name]
    argv += server.args + speculative_args + scenario.variants[variant].args
    own = scenario.variants[variant]
    env = {**server.env, **own.env}
    return LaunchPlan(
        engine=engine,
        variant=variant,
        argv=argv,
        env=env,
        host=server.host,
        port=port,
        version_argv=version_argv,
        model=model,
        nice=server.nice if own.nice is None else own.nice,
    )


def resolve_port(scenario: Scenario, port: int | None) -> int:
    chosen = port if port is not None else scenario.server.port
    return chosen if chosen is not None else free_port(scenario.server.host)


def get_json(url: str, timeout_s: float = 10.0) -> tuple[int, object]:
    """``(status, parsed JSON or None)`` of a GET with the API key, within ``timeout_s`` in all; raises
    ``OSError`` when there is no answer (or one over 1 MiB)."""
    status, raw = control.call(url, timeout_s=timeout_s)
    if status >= 400 or not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def first_model_id(models: object) -> str | None:
    """The first model id of a ``/v1/models`` answer, whatever shape a server gives it; None if there is none."""
    data = models.get("data") if isinstance(models, dict) else models
    if not isinstance(data, list):
        return None
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            return entry["id"]
    return None


def served_model(base_url: str) -> tuple[str, str | None]:
    """The model a running server serves (``""`` when it does not say), and who it says owns it (``owned_by`` of
    ``/v1/models``: ``llamacpp``, ``vllm``, ``sglang``...; None when it does not say)."""
    try:
        _, models = get_json(f"{base_url.rstrip('/')}/v1/models")
    except (OSError, ValueError):
        return "", None
    data = models.get("data") if isinstance(models, dict) else models
    first = next((e for e in data if isinstance(e, dict)), {}) if isinstance(data, list) else {}
    owner = first.get("owned_by")
    return first_model_id(models) or "", owner if isinstance(owner, str) and owner else None


def context_size(base_url: str) -> int | None:
    """Tokens one request may hold (prompt + output) on a running server, or None when it does not say:
    vLLM's ``max_model_len`` or llama.cpp's per-slot ``n_ctx`` from ``/v1/models``, else llama.cpp's
    ``/props``."""
    base = base_url.rstrip("/")
    try:
        _, models = get_json(f"{base}/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        entry = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        size = entry.get("max_model_len") or (entry.get("meta") or {}).get("n_ctx")
        if not size:
            _, props = get_json(f"{base}/props")
            size = (
                ((props or {}).get("default_generation_settings") or {}).get("n_ctx")
                if isinstance(props, dict)
                else None
            )
    except (OSError, ValueError, AttributeError):
        return None
    return int(size) if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0 else None
