"""Host contention: own versus foreign CPU from synthetic scans, from real burners, GPU processes via a fake NVML,
and the scanner running as a process of its own beside the master."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections import namedtuple
from types import SimpleNamespace

import psutil
import pyarrow as pa
import pytest

from locust_llm.host.scan import HOST_SCHEMA, HostScanner, Proc

CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
ME = os.getpid()
FOREIGN, CHILD, GRANDCHILD, WORKER, WORKER_CHILD, LATE = 900001, 900002, 900003, 900004, 900005, 900006
# Self-terminating, so a burner outlives a crashed test by seconds, not forever.
BURN = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"


def cpu(user: float, steal: float = 0.0) -> CpuTimes:
    return CpuTimes(user, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, steal, 0.0, 0.0)


def procs(**cpu_s: float) -> list[Proc]:
    parents = {
        "me": (ME, 1),
        "foreign": (FOREIGN, 1),
        "child": (CHILD, ME),
        "grandchild": (GRANDCHILD, CHILD),
        "worker": (WORKER, 1),
        "worker_child": (WORKER_CHILD, WORKER),
        "late": (LATE, 1),
    }
    return [Proc(parents[name][0], parents[name][1], name, 50.0, seconds) for name, seconds in cpu_s.items()]


def test_synthetic_scans_split_own_from_foreign():
    scanner = HostScanner(ME)
    first = procs(me=1.0, foreign=5.0, child=2.0, grandchild=3.0, worker=4.0, worker_child=1.0)
    assert scanner.sample(10.0, cpu(100.0, steal=1.0), first, own_pids=[WORKER]) is None  # primes only
    second = procs(me=1.1, foreign=5.8, child=2.5, grandchild=3.2, worker=4.1, worker_child=1.1, late=9.0)
    row = scanner.sample(11.0, cpu(101.8, steal=1.25), second, own_pids=[WORKER])
    assert row["interval_s"] == pytest.approx(1.0)
    assert row["busy_cores"] == pytest.approx(1.8)
    assert row["own_cores"] == pytest.approx(1.0)  # me, child, grandchild, worker, worker's child
    assert row["foreign_cores"] == pytest.approx(0.8)
    assert row["steal_cores"] == pytest.approx(0.25)
    assert row["foreign_gpu_processes"] == 0
    top = json.loads(row["top_foreign"])
    assert top == [{"pid": FOREIGN, "name": "foreign", "cores": 0.8}]  # "late" was not in the first scan


def test_reused_pid_and_idle_neighbours_are_not_named():
    scanner = HostScanner(ME)
    scanner.sample(0.0, cpu(0.0), [Proc(FOREIGN, 1, "old", 1.0, 50.0), Proc(LATE, 1, "idle", 1.0, 1.0)])
    row = scanner.sample(2.0, cpu(0.0), [Proc(FOREIGN, 1, "new", 2.0, 0.5), Proc(LATE, 1, "idle", 1.0, 1.01)])
    assert row["top_foreign"] == "[]"
    assert row["foreign_cores"] == 0.0 and row["busy_cores"] == 0.0


def scan_over_a_second(scanner: HostScanner, burner: int) -> tuple[dict, float]:
    """The scan's row, and the cores the burner really used over the same second (on a busy machine it gets
    less than one)."""
    time.sleep(0.2)  # the burner is running (and named python) before the priming scan
    burner_cpu = psutil.Process(burner).cpu_times
    before, t_before = sum(burner_cpu()[:2]), time.monotonic()
    assert scanner.scan() is None
    time.sleep(1.0)
    row = scanner.scan()
    return row, (sum(burner_cpu()[:2]) - before) / (time.monotonic() - t_before)


def test_real_foreign_burner_is_foreign():
    # The shell exits at once, so the burner is reparented away from this process's tree.
    shell = subprocess.Popen(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(BURN)} >/dev/null 2>&1 </dev/null & echo $!"],
        stdout=subprocess.PIPE,
        text=True,
    )
    burner = int(shell.stdout.readline())
    try:
        shell.wait(timeout=10)
        row, burner_cores = scan_over_a_second(HostScanner(ME), burner)
        assert burner_cores > 0.1
        assert row["foreign_cores"] >= 0.8 * burner_cores
        assert burner in [entry["pid"] for entry in json.loads(row["top_foreign"])]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(burner, 9)
        shell.stdout.close()


def test_real_child_burner_is_own():
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        row, burner_cores = scan_over_a_second(HostScanner(ME), burner.pid)
        assert burner_cores > 0.1
        assert row["own_cores"] >= 0.8 * burner_cores
        assert burner.pid not in [entry["pid"] for entry in json.loads(row["top_foreign"])]
    finally:
        burner.kill()
        burner.wait(timeout=10)


class FakeNvml:
    def __init__(self, pids_per_device: list[list[int]], fail: bool = False):
        self.devices, self.fail = pids_per_device, fail

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        if self.fail:
            raise RuntimeError("NVMLError_GpuIsLost")
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in self.devices[handle]]


def gpu_row(nvml: FakeNvml) -> dict:
    scanner = HostScanner(ME, nvml=nvml)
    scanner.sample(
        0.0, cpu(0.0), procs(me=0.0, worker=0.0, worker_child=0.0, foreign=0.0), scanner.gpu_pids(), [WORKER]
    )
    return scanner.sample(
        1.0, cpu(0.0), procs(me=0.0, worker=0.0, worker_child=0.0, foreign=0.0), scanner.gpu_pids(), [WORKER]
    )


def test_nvml_counts_foreign_gpu_processes():
    assert gpu_row(FakeNvml([[ME], [FOREIGN]]))["foreign_gpu_processes"] == 1
    # a pid on two devices counts once; a pid this host's process list does not show (a container seeing the
    # host's pids) cannot be judged and is not counted
    assert gpu_row(FakeNvml([[WORKER_CHILD, FOREIGN], [FOREIGN, 424242]]))["foreign_gpu_processes"] == 1


def test_failing_nvml_counts_nothing():
    assert gpu_row(FakeNvml([[FOREIGN]], fail=True))["foreign_gpu_processes"] == 0


def test_the_master_runs_the_scanner_as_its_own_process_and_keeps_its_rows():
    import gevent

    from locust_llm.runtime.hostmon import HostMonitor

    monitor = HostMonitor(lambda: [WORKER], interval_s=0.2)
    monitor.start()
    monitor.start()  # idempotent
    scanner = monitor._proc
    try:
        deadline = time.monotonic() + 30  # the scanner starts a Python process first
        while len(monitor.samples) < 2 and time.monotonic() < deadline:
            gevent.sleep(0.05)
    finally:
        monitor.stop()
        monitor.stop()
    assert scanner.poll() is not None  # stopping ends the process
    table = monitor.table()
    assert table.schema == HOST_SCHEMA and table.num_rows == len(monitor.samples) >= 2
    assert all(row["own_cores"] >= 0 and row["interval_s"] > 0 for row in monitor.samples)


def test_host_parquet_loads_back(tmp_path):
    from locust_llm.rundir import layout
    from locust_llm.rundir.load import load_run

    layout.write_json(tmp_path / layout.STEPS, {"steps": [], "events": []})
    assert load_run(tmp_path).host.empty  # an older run without the file
    scanner = HostScanner(ME)
    scanner.sample(0.0, cpu(0.0), procs(me=0.0, foreign=0.0))
    row = scanner.sample(1.0, cpu(0.5), procs(me=0.1, foreign=0.4))
    layout.write_parquet(tmp_path / layout.HOST, pa.Table.from_pylist([row], schema=HOST_SCHEMA))
    host = load_run(tmp_path).host
    assert list(host.columns) == HOST_SCHEMA.names
    assert host["foreign_cores"].tolist() == pytest.approx([0.4])


LISTENING_BURNER = (
    "import os, socket, time\nsock = socket.socket()\nsock.bind(('127.0.0.1', 0))\nsock.listen()\n"
    "print(sock.getsockname()[1], os.getpid(), flush=True)\n" + BURN
)


def test_a_server_on_this_machine_behind_host_is_the_runs_own_cpu():
    """A busy process listening on a loopback port (a --host server started beside the load, not by us: outside
    our process tree) is found by its URL and counted as own; a scan that does not know it counts it as foreign."""
    from locust_llm.host.procs import listener_pids

    # Started through a shell that exits at once: the burner is nobody's child here, as a server started by hand.
    shell = subprocess.Popen(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(LISTENING_BURNER)} &"],
        stdout=subprocess.PIPE,
        text=True,
    )
    port, pid = map(int, shell.stdout.readline().split())
    shell.wait()
    try:
        assert listener_pids(f"http://127.0.0.1:{port}") == {pid}
        assert listener_pids(f"http://localhost:{port}/v1") == {pid}
        assert listener_pids("http://192.0.2.1:8000") == set()  # not this machine (TEST-NET-1): nothing is sent
        knowing, unaware = HostScanner(ME), HostScanner(ME)
        own = listener_pids(f"http://127.0.0.1:{port}")
        burner_cpu = psutil.Process(pid).cpu_times
        before, t_before = sum(burner_cpu()[:2]), time.monotonic()
        knowing.scan(own), unaware.scan()
        time.sleep(1.0)
        with_server, without = knowing.scan(own), unaware.scan()
        burner_cores = (sum(burner_cpu()[:2]) - before) / (time.monotonic() - t_before)
    finally:
        os.kill(pid, 9)
    assert burner_cores > 0.1  # on a busy machine the burner gets less than its core: compare with what it got
    assert with_server["own_cores"] - without["own_cores"] > 0.7 * burner_cores  # the burner counted as own
    assert without["foreign_cores"] - with_server["foreign_cores"] > 0.7 * burner_cores
