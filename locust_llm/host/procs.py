"""Child processes we start (inference servers, Prometheus): they die with us and stop as a whole group; and the
process behind a server URL on this machine (``listener_pids``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections import deque
from pathlib import Path
from urllib.parse import urlsplit

import psutil

__all__ = ["die_with_parent", "listener_pids", "log_tail", "start_child", "stop_group"]


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends the child SIGTERM if the process that launched it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_child(nice: int = 0) -> None:
    """``preexec_fn`` of a launched server: dies with its parent, runs at the scenario's priority."""
    die_with_parent()
    if nice:
        os.nice(nice)


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``grace_s``, and wait until no member is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    try:
        # The leader may be gone while children of its group (e.g. vLLM's engine core) linger.
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    _wait_group_gone(proc.pid, timeout_s=5.0)


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Signals are delivered asynchronously: wait until no live member of the group is left."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            members = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == pgid]
        except psutil.Error:
            members = []
        if all(_is_zombie(p) for p in members):
            return
        time.sleep(0.05)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _is_zombie(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def log_tail(path: str | Path | None, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except (OSError, TypeError):
        return "(no log)"


WILDCARDS = ("0.0.0.0", "::")


def listener_pids(base_url: str) -> set[int]:
    """The processes listening on ``base_url``'s port when its host is one of this machine's own addresses: a
    server started beside the load (``locust-llm serve``, or by hand), whose CPU is the run's own, not another
    job's. Empty for another machine, and where the system does not say (another user's process, seen without the
    rights to). Reads the kernel's socket table; sends nothing."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        wanted = {info[4][0] for info in socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)}
        local = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
        if not wanted & local:
            return set()
        sockets = psutil.net_connections(kind="tcp")
    except (OSError, ValueError, psutil.Error):
        return set()
    return {
        c.pid
        for c in sockets
        if c.status == psutil.CONN_LISTEN
        and c.pid
        and c.laddr
        and c.laddr.port == port
        and (c.laddr.ip in wanted or c.laddr.ip in WILDCARDS)
    }
