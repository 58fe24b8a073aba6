"""A project-owned Prometheus: scrapes the launched server (and a DCGM exporter) every second, then goes away.

Started on 127.0.0.1 on a free port with a generated config and a temporary storage directory (never the
system's ``/etc/prometheus`` or ``:9090``). Targets live in a file-SD JSON file, so adding a variant's server
needs no restart: ``add_server(variant, base_url)`` rewrites it and Prometheus picks it up within a second
(several are scraped at once when variants are interleaved). Every target carries
``locust_llm_variant="<variant>"``; ``selector(variant)`` is the matcher (the name quoted) the poller adds to its
queries. ``stop()`` sends SIGTERM to the process group, SIGKILL after the grace period, and removes the storage;
the child also dies with its parent (PR_SET_PDEATHSIG). Its scrape carries no API key: Prometheus reads credentials
only from its config or a file, and the key is never written to a file.

Binary: ``prometheus`` on PATH (Debian package ``prometheus``) or ``$LOCUST_LLM_PROMETHEUS``.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from ..client.http import requests
from ..host.procs import die_with_parent, log_tail, stop_group
from ..rundir import write_json
from ..rundir.layout import PROMETHEUS_LOG
from .sources import promql_string

__all__ = ["PrometheusError", "PrometheusServer", "prometheus_binary"]

log = logging.getLogger(__name__)

VARIANT_LABEL = "locust_llm_variant"
SERVER_JOB = "llm-server"
DCGM_JOB = "dcgm"


class PrometheusError(RuntimeError):
    """Prometheus is missing, did not start, or did not become ready; the message says why."""


def prometheus_binary() -> str | None:
    explicit = os.environ.get("LOCUST_LLM_PROMETHEUS")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("prometheus")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _target(url: str) -> tuple[str, str, str]:
    """``(scheme, host:port, metrics path)`` of a server base URL or a full metrics URL."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.hostname:
        raise PrometheusError(f"cannot scrape {url!r}: no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path.rstrip("/")
    return parts.scheme or "http", f"{parts.hostname}:{port}", path if path.endswith("metrics") else path + "/metrics"


_RUNNING: set[PrometheusServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


class PrometheusServer:
    def __init__(
        self,
        scrape_interval_s: float = 1.0,
        dcgm_url: str | None = None,
        log_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        startup_timeout_s: float = 30.0,
        stop_grace_s: float = 10.0,
    ):
        self.scrape_interval_s = scrape_interval_s
        self.dcgm_url = dcgm_url
        self.host = host
        self.port = port
        self.binary = binary or prometheus_binary()
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.workdir: Path | None = None
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None
        self.version: str | None = None
        self.targets: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @staticmethod
    def selector(variant: str) -> str:
        return f"{VARIANT_LABEL}={promql_string(variant)}"

    # -- config -----------------------------------------------------------------------------
    def config(self) -> dict:
        interval = f"{max(round(self.scrape_interval_s * 1000), 100)}ms"  # Prometheus takes no "0.5s"
        servers_file = str(self.workdir / "servers.json")
        scrape_configs = [
            {
                "job_name": SERVER_JOB,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "file_sd_configs": [{"files": [servers_file], "refresh_interval": "1s"}],
            }
        ]
        if self.dcgm_url:
            scheme, address, path = _target(self.dcgm_url)
            scrape_configs.append(
                {
                    "job_name": DCGM_JOB,
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "scheme": scheme,
                    "metrics_path": path,
                    "static_configs": [{"targets": [address]}],
                }
            )
        return {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "scrape_configs": scrape_configs,
        }

    def _write_targets(self) -> None:
        groups = []
        for variant, url in self.targets.items():
            scheme, address, path = _target(url)
            groups.append(
                {
                    "targets": [address],
                    "labels": {VARIANT_LABEL: variant, "__scheme__": scheme, "__metrics_path__": path},
                }
            )
        write_json(self.workdir / "servers.json", groups)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> PrometheusServer:
        if self.proc is not None:
            return self
        if not self.binary:
            raise PrometheusError(
                "prometheus is not on PATH; install it (Debian: apt-get install prometheus) "
                "or set LOCUST_LLM_PROMETHEUS, or run without it (direct /metrics scrape)"
            )
        self.port = self.port or _free_port(self.host)
        self.workdir = Path(tempfile.mkdtemp(prefix="locust-llm-prometheus-"))
        (self.workdir / "config.yml").write_text(json.dumps(self.config(), indent=1))  # JSON is YAML
        self._write_targets()
        if self.log_path is None:
            self.log_path = self.workdir / PROMETHEUS_LOG
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
            text = (out.stdout + out.stderr).strip()
            self.version = text.splitlines()[0] if text else None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PrometheusError(f"cannot run {self.binary!r}: {exc}") from None
        argv = [
            self.binary,
            f"--config.file={self.workdir / 'config.yml'}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={self.host}:{self.port}",
            "--storage.tsdb.retention.time=1d",
        ]
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"$ {' '.join(argv)}\n".encode())
            log_file.flush()
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.workdir,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )  # noqa: PLW1509
            except OSError as exc:
                self._cleanup()
                raise PrometheusError(f"could not start {self.binary!r}: {exc}") from None
        _RUNNING.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("Prometheus %s ready at %s", self.version or "", self.url)
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PrometheusError(
                    f"prometheus exited with code {self.proc.returncode} during start-up:\n{self.log_tail()}"
                )
            try:
                answer = requests.get(f"{self.url}/-/ready", timeout=2)
                if answer.status_code == 200:
                    return
                last = f"/-/ready answered {answer.status_code}"
            except requests.RequestException as exc:
                last = type(exc).__name__
            time.sleep(0.1)
        raise PrometheusError(f"prometheus not ready after {self.startup_timeout_s:.0f} s ({last}):\n{self.log_tail()}")

    def add_server(self, variant: str, base_url: str) -> None:
        """Scrape ``base_url``'s /metrics as ``variant`` too (interleaved runs have several servers up)."""
        self.targets[variant] = base_url
        if self.workdir is not None:
            self._write_targets()

    def remove_server(self, variant: str) -> None:
        if self.targets.pop(variant, None) is not None and self.workdir is not None:
            self._write_targets()

    def wait_for_target(self, variant: str, timeout_s: float = 15.0) -> bool:
        """True once ``variant``'s target has been scraped successfully after this call."""
        since = time.time()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                data = requests.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=2).json()
                for target in data.get("data", {}).get("activeTargets", []):
                    if target.get("labels", {}).get(VARIANT_LABEL) != variant or target.get("health") != "up":
                        continue
                    if _rfc3339(target.get("lastScrape", "")) >= since:
                        return True
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.2)
        return False

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the grace period, remove the storage; idempotent."""
        _RUNNING.discard(self)
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_group(proc, self.stop_grace_s)
        self._cleanup()

    def _cleanup(self) -> None:
        if self.workdir is not None:
            if self.log_path is not None and self.log_path.parent == self.workdir:
                self.log_path = None  # it goes with the directory
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def describe(self) -> dict:
        return {
            "url": self.url,
            "version": self.version,
            "binary": self.binary,
            "scrape_interval_s": self.scrape_interval_s,
            "dcgm_url": self.dcgm_url,
        }

    def __enter__(self) -> PrometheusServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _rfc3339(text: str) -> float:
    """Seconds since the epoch of Prometheus's ``lastScrape`` (nanosecond RFC 3339, any offset)."""
    from datetime import datetime

    if not text or text.startswith("0001-"):
        return 0.0
    text = text.replace("Z", "+00:00")
    head, _, rest = text.partition(".")
    if rest:  # trim the fraction to microseconds, keep the offset
        digits = "".join(ch for ch in rest if ch.isdigit())
        offset = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{offset}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0
