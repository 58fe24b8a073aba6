"""One writer per run directory: ``RUN/.lock`` names the process writing the run, for as long as it does.

A second run on the same directory (``--overwrite`` included) is refused while the writer lives; ``locust-llm
report`` on it says the run is still being written. A lock whose process is gone (a run killed with SIGKILL, a
machine that rebooted, a zombie, its pid given to a newer process) is stale: the next claim takes it over. The lock
is made with ``O_EXCL``, so of two runs started at the same moment exactly one gets it. A lock written on another
host (a shared file system) cannot be checked from here and counts as held.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

import psutil

__all__ = ["LOCK", "RunLock", "RunLocked", "lock_holder"]

LOCK = ".lock"


class RunLocked(Exception):
    """The run directory is being written by another live process (``holder``: its pid, host and start)."""

    def __init__(self, run_dir: Path, holder: dict):
        self.holder = holder
        started = holder.get("started")
        since = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started)) if started else ""
        super().__init__(
            f"run directory {run_dir} is being written by process {holder.get('pid', '?')} on "
            f"{holder.get('host', '?')}{since} (its lock: {Path(run_dir) / LOCK})"
        )


def lock_holder(run_dir: Path) -> dict | None:
    """The live process writing ``run_dir`` (``{"pid", "host", "started"}``), or None: no lock, or a stale one."""
    path = Path(run_dir) / LOCK
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"pid": None, "host": "?"}  # a lock being made this very moment: held
    if not isinstance(holder, dict):
        return {"pid": None, "host": "?"}
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and isinstance(pid, int) and not _alive(pid, holder.get("started")):
        return None
    return holder


def _alive(pid: int, started: object) -> bool:
    """Whether the lock's process still runs: not gone, not a zombie waiting for its parent, and not a newer
    process that was given the same pid after the writer died."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        born = process.create_time()
    except psutil.Error:
        return False
    # create_time is rounded to the clock tick; a second of slack keeps the writer itself alive
    return not isinstance(started, (int, float)) or born <= started + 1.0


class RunLock:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK
        self.held = False

    def acquire(self) -> None:
        """Take the lock, or raise ``RunLocked`` naming the live process that holds it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = lock_holder(self.run_dir)
                if holder is not None:
                    raise RunLocked(self.run_dir, holder) from None
                self.path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, fh)
            self.held = True
            return
        raise RunLocked(self.run_dir, lock_holder(self.run_dir) or {})

    def release(self) -> None:
        """Remove the lock if this process still holds it."""
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(OSError, ValueError):
            if json.loads(self.path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                self.path.unlink()
