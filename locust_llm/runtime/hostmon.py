"""The master's view of host contention: runs ``locust_llm.host.scan`` as a process of its own and keeps its rows.

Worker pids the recorder learns (workers started on this host with ``--worker``) are passed to the scanner as
they change; the scanner's own process is in the master's tree, so it counts as the run's own CPU.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterable

import gevent
import pyarrow as pa
from gevent import subprocess

from ..host.procs import die_with_parent
from ..host.scan import HOST_SCHEMA

log = logging.getLogger(__name__)

__all__ = ["HostMonitor"]


class HostMonitor:
    def __init__(self, own_pids: Callable[[], Iterable[int]], interval_s: float = 1.0):
        self._own_pids = own_pids
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self._proc: subprocess.Popen | None = None
        self._greenlets: list[gevent.Greenlet] = []

    def start(self) -> None:
        if self._proc is not None:
            return
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "locust_llm.host.scan",
                    "--root",
                    str(os.getpid()),
                    "--interval",
                    str(self.interval_s),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            log.warning("host contention is not monitored: %s", exc)
            return
        self._greenlets = [gevent.spawn(self._read), gevent.spawn(self._send_pids)]

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                self.samples.append(json.loads(line))
            except ValueError:
                log.debug("host scanner said: %s", line.strip())

    def _send_pids(self) -> None:
        sent: list[int] | None = None
        while True:
            try:
                pids = sorted(int(pid) for pid in self._own_pids())
            except Exception:  # noqa: BLE001
                log.warning("worker pids unknown; only the master's tree counts as own", exc_info=True)
                pids = []
            if pids != sent:
                self._proc.stdin.write(json.dumps(pids) + "\n")
                self._proc.stdin.flush()
                sent = pids
            gevent.sleep(self.interval_s)

    def stop(self) -> None:
        """End the scanner (it stops when its stdin closes) and keep every row it wrote."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._greenlets[1].kill()
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        self._greenlets[0].join(timeout=2)
        self._greenlets = []

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.samples, schema=HOST_SCHEMA)
