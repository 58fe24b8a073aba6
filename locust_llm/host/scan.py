"""Host contention: CPU and GPU that processes outside the run are using, sampled once a second.

A neighbour burning cores or holding a GPU makes the server look slower than it is. Each interval one
process scan splits the host's busy CPU into the run's (the master's process tree: the servers it launched,
our Prometheus, ``--processes`` workers; plus workers started separately, by pid) and everyone else's, so the
analysis can tell a slow server from a busy host.

It runs as a process of its own (``python -m locust_llm.host.scan --root PID``, started by
``runtime.hostmon.HostMonitor``): a scan parses every ``/proc/<pid>`` file in Python, and on a saturated machine a
thread doing that inside the load generator could hold its interpreter lock while descheduled, delaying every
stream's timestamps. Rows go to stdout as JSON lines; stdin takes JSON lists of further own pids; the process
ends when stdin closes (the master is gone). Needs psutil and pyarrow only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import psutil
import pyarrow as pa

from .nvml import probe_nvml

log = logging.getLogger(__name__)

__all__ = ["HOST_SCHEMA", "HostScanner", "Proc", "main"]

HOST_SCHEMA = pa.schema(
    [
        ("t", pa.float64()),  # epoch seconds at the end of the interval
        ("interval_s", pa.float64()),
        ("busy_cores", pa.float64()),  # all CPUs, not idle / iowait / steal
        ("own_cores", pa.float64()),
        ("foreign_cores", pa.float64()),  # max(busy - own, 0)
        ("steal_cores", pa.float64()),
        ("foreign_gpu_processes", pa.int32()),
        ("top_foreign", pa.string()),  # JSON [{"pid", "name", "cores"}], busiest first
    ]
)

TOP_FOREIGN = 5
TOP_FOREIGN_MIN_CORES = 0.02  # below this a process is noise, not a neighbour worth naming
# Not busy: waiting (idle, iowait) or taken by the hypervisor (steal). guest and guest_nice are already
# inside user and nice on Linux, so adding them would count that time twice.
NOT_BUSY = frozenset({"idle", "iowait", "steal", "guest", "guest_nice"})
_PROCESS_ERRORS = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


class Proc(NamedTuple):
    """One process in a scan; ``cpu_s`` is user + system seconds (None when unreadable)."""

    pid: int
    ppid: int | None
    name: str
    create_time: float | None
    cpu_s: float | None


class HostScanner:
    """Own versus foreign CPU (and GPU processes) between consecutive scans.

    ``root`` is the master's pid: it and its descendants, and ``own_pids`` given to each scan with theirs, are
    the run's own. ``nvml`` is an initialised NVML module (``probe_nvml``'s); None probes for one on first use.
    """

    def __init__(self, root: int, nvml=None):
        self.root = root
        self.nvml = nvml
        self.nvml_description = "given" if nvml is not None else ""
        self._nvml_probed = nvml is not None
        self._prev: tuple[float, Any, dict[int, Proc]] | None = None  # the last scan: t, cpu_times, by pid

    def _probe_nvml(self) -> None:
        self._nvml_probed = True
        self.nvml, self.nvml_description = probe_nvml()

    def scan(self, own_pids: Iterable[int] = ()) -> dict | None:
        """Read the host now and return the row for the interval since the last scan (None on the first)."""
        processes = list(_processes())
        cpu_times = psutil.cpu_times()
        t = time.time()  # after the totals: their interval is the one the row reports
        return self.sample(t, cpu_times, processes, self.gpu_pids(), own_pids)

    def gpu_pids(self) -> list[int]:
        """Pids of compute processes on every GPU NVML sees; empty without NVML or when it fails."""
        if not self._nvml_probed:
            self._probe_nvml()
        if self.nvml is None:
            return []
        try:
            pids = []
            for index in range(self.nvml.nvmlDeviceGetCount()):
                handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
                pids += [int(p.pid) for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
            return pids
        except Exception as exc:  # noqa: BLE001  (NVMLError_*: a GPU fell off the bus, a driver reload)
            log.debug("NVML process list: %s", exc)
            return []

    def sample(
        self,
        now_t: float,
        cpu_times: Any,
        processes: Iterable[Proc],
        gpu_pids: Iterable[int] = (),
        own_pids: Iterable[int] = (),
    ) -> dict | None:
        """The row for the interval from the previous call to this one; the first call only primes."""
        current = {proc.pid: proc for proc in processes}
        prev, self._prev = self._prev, (now_t, cpu_times, current)  # one assignment: a racing scan sees either
        if prev is None:
            return None
        prev_t, prev_times, prev_procs = prev
        interval = now_t - prev_t
        if interval <= 0:
            return None
        own = _own_tree(current.values(), {self.root, *own_pids})

        own_s, foreign = 0.0, []
        for pid, proc in current.items():
            before = prev_procs.get(pid)
            if before is None or proc.cpu_s is None or before.cpu_s is None or not _same_process(before, proc):
                continue
            used = max(proc.cpu_s - before.cpu_s, 0.0)
            if pid in own:
                own_s += used
            elif used / interval > TOP_FOREIGN_MIN_CORES:
                foreign.append((used, pid, proc.name))
        foreign.sort(reverse=True)
        top = [
            {"pid": pid, "name": name, "cores": round(used / interval, 3)} for used, pid, name in foreign[:TOP_FOREIGN]
        ]

        busy = max(_busy_s(cpu_times) - _busy_s(prev_times), 0.0) / interval
        own_cores = own_s / interval
        steal = max(getattr(cpu_times, "steal", 0.0) - getattr(prev_times, "steal", 0.0), 0.0) / interval
        return {
            "t": now_t,
            "interval_s": interval,
            "busy_cores": busy,
            "own_cores": own_cores,
            "foreign_cores": max(busy - own_cores, 0.0),
            "steal_cores": steal,
            # Only pids this scan sees: in a container NVML may list host pids, our own server's among them.
            "foreign_gpu_processes": len({pid for pid in gpu_pids if pid in current} - own),
            "top_foreign": json.dumps(top),
        }


def _processes() -> Iterable[Proc]:
    for proc in psutil.process_iter(["ppid", "name", "cpu_times", "create_time"]):
        try:
            info = proc.info  # attributes psutil could not read are None here
            times = info["cpu_times"]
            yield Proc(
                proc.pid,
                info["ppid"],
                info["name"] or "",
                info["create_time"],
                times.user + times.system if times is not None else None,
            )
        except _PROCESS_ERRORS:
            continue


def _own_tree(processes: Iterable[Proc], roots: set[int]) -> set[int]:
    """``roots`` and every descendant of theirs in the scan."""
    children: dict[int, list[int]] = {}
    for proc in processes:
        if proc.ppid is not None:
            children.setdefault(proc.ppid, []).append(proc.pid)
    own, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in own:  # pid 0 is its own parent on some systems
            own.add(pid)
            todo += children.get(pid, [])
    return own


def _same_process(before: Proc, after: Proc) -> bool:
    # A reused pid is a different process; its counters restart and the delta would be garbage.
    if before.create_time is not None and after.create_time is not None:
        return before.create_time == after.create_time
    return before.name == after.name


def _busy_s(cpu_times: Any) -> float:
    return sum(getattr(cpu_times, name) for name in cpu_times._fields if name not in NOT_BUSY)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="host CPU/GPU use, own versus foreign, as JSON lines")
    parser.add_argument("--root", type=int, required=True, help="the master's pid")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    scanner = HostScanner(args.root)
    own: list[int] = []
    stdin_open = threading.Event()
    stdin_open.set()

    def read_pids() -> None:
        for line in sys.stdin:
            try:
                own[:] = [int(pid) for pid in json.loads(line)]
            except (ValueError, TypeError):
                continue
        stdin_open.clear()

    threading.Thread(target=read_pids, daemon=True).start()
    next_at = time.monotonic()
    while stdin_open.is_set() and psutil.pid_exists(args.root):
        try:
            row = scanner.scan(list(own))
        except Exception:  # noqa: BLE001  (a failed scan loses one sample, never the run)
            log.warning("host scan failed", exc_info=True)
            row = None
        if row is not None:
            print(json.dumps(row), flush=True)
        next_at += args.interval
        time.sleep(max(next_at - time.monotonic(), 0.0))


if __name__ == "__main__":
    main()
