"""How many records per second does one Locust master take in, and where does it stop keeping up?

The master is this process: a real Locust ``MasterRunner`` on 127.0.0.1 whose records handler is the plugin's own
(``plugin.on_records_message`` -> ``Recorder``: intake, live figures, Arrow, a Parquet part file every 2 s). The
workers are separate processes, real Locust ``WorkerRunner``s, each with the plugin's ``RecordShipper``: they add
synthetic records (one chunk per token, about 20 ms apart, 3% failures) at a set rate and the shipper sends
them once a second over Locust's message channel, as in a run. So the master's process does what it does in a
run: Locust's rpc decode (msgpack), the handler, the intake; and Locust's heartbeats with every worker.

For each size (output tokens per record) and number of workers: a first step at ``--probe-tok-s`` tokens/s,
run by the records' path before issue 17 (``old``: one dict per record, converted a slice at a time; the master
still takes such records in as ``records``) and by the columnar path (``new``), one right after the other, with
the ratio of their master CPU per record; then a ladder of rates for ``--ladder`` paths (new by default), from
0.8x of where the first step's costs say the master (one core) or the host's cores saturate, times 1.7 a step,
until the master falls behind. A step keeps up when every record sent is taken in (turned into Arrow on its way
to disk) and none waited longer than one ship interval (1 s) between its worker sending it and the master taking
it in; above that the backlog grows. Per step: records/s offered, sent and taken in, the longest wait, the
largest backlog (records sent and not yet taken in: in zmq's queues or the recorder's intake), the master's CPU
(``getrusage`` of its process, Locust's heartbeats included) per 1,000 records and as % of one core over the
step, the workers' CPU per 1,000 records, the longest the master's event loop stalled (Locust marks a worker
missing after about 3 s without a heartbeat), and the CPU other processes on the machine took (% of one core: on
a shared machine, a step a neighbour slowed shows here). ``--profile`` adds a profiled step per path and size and
prints where the master's CPU went (cProfile).

    python benchmarks/master_ingest.py [--quick] [--tokens 64,256,1024] [--workers 1,4,8] [--seconds 2]
                                       [--ladder new|old,new] [--profile] [--json out.json]

Loopback only; about three minutes by default (five with ``--ladder old,new``), about 30 s with ``--quick``
(4 workers, one ladder step); the workers exit with it.
"""

from __future__ import annotations  # noqa: I001  (locust first: it monkey-patches)

import locust  # noqa: F401  (gevent patches the standard library first)

import argparse
import bisect
import cProfile
import functools
import gc
import io
import itertools
import json
import logging
import math
import os
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gevent
import gevent.socket
import psutil
from locust.env import Environment
from locust.event import Events

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locust_llm.records import ErrorClass, Phase, RequestRecord  # noqa: E402
from locust_llm.runtime import plugin  # noqa: E402
from locust_llm.runtime.recorder import Recorder  # noqa: E402
from locust_llm.runtime.shipper import RECORDS_MESSAGE, SHIP_INTERVAL_S, RecordShipper  # noqa: E402

STEP_MESSAGE = "bench_ingest_step"
KEEP_UP_WAIT_S = SHIP_INTERVAL_S  # a record may wait one ship interval at the master, not more
DRAIN_MAX_S = 6.0  # after the last batch: how long the master may take to catch up before the step is cut off
# Distinct offsets per worker and size: more than Parquet's dictionary page holds (1 MiB of float32), so the part
# files are encoded as a run's all-distinct offsets are.
POOL_VALUES = 300_000
ADD_TICK_S = 0.01
PATHS = ("old", "new")  # the records' path before issue 17, and the columnar one
LADDER_FACTOR = 1.7


# --- worker process --------------------------------------------------------------------------------------------


class DictShipper(RecordShipper):
    """The records' path before issue 17: one dict per record in the message's ``records``."""

    def __init__(self, runner, worker: int):
        super().__init__(runner, worker)
        self.dicts: list[dict] = []

    def add(self, record: RequestRecord) -> None:
        self.count(record)
        self.dicts.append(record.to_dict())

    def ship(self, final: bool = False) -> None:
        batch, self.dicts = self.dicts, []
        self.sent_total += len(batch)
        self.runner.send_message(
            RECORDS_MESSAGE,
            {
                "worker": self.worker,
                "records": batch,
                "client": self.monitor.drain(),
                "sent_total": self.sent_total,
                "users_running": 0 if final else self.runner.user_count,
                "final": final,
                "pid": os.getpid(),
                "progress": dict(self.progress),
            },
        )


class CountingRunner:
    """The worker's runner as the shipper sees it; tells the master (on stdout) how many records went out when."""

    user_count = 0

    def __init__(self, runner, step: int):
        self.runner, self.step = runner, step

    def send_message(self, msg_type: str, data: dict) -> None:
        self.runner.send_message(msg_type, data)
        print(
            json.dumps({"step": self.step, "sent": data["sent_total"], "final": data["final"], "t": time.time()}),
            flush=True,
        )


@functools.cache
def synthetic(tokens: int, worker: int) -> list[RequestRecord]:
    """Records as a run writes them: realistic offsets (float64 until the schema's float32), a few failures."""
    rng = random.Random(worker)
    pool = []
    for i in range(max(64, POOL_VALUES // tokens)):
        offsets, t = [], rng.lognormvariate(math.log(0.05), 0.3)
        for _ in range(tokens):
            offsets.append(t)
            t += rng.uniform(0.5, 1.5) * 0.02
        failed = i % 33 == 7  # an idle timeout part-way: its chunks are kept
        pool.append(
            RequestRecord(
                run_id="bench-ingest",
                variant=("baseline", "spec-k4")[i % 2],
                level=8.0,
                step=0,
                phase=Phase.STEADY,
                mode="closed",
                worker=worker,
                bucket="default",
                prompt_tokens=rng.randint(64, 2048),
                max_tokens=tokens,
                output_tokens=tokens,
                token_source="usage_deltas",
                chunk_offsets=offsets,
                chunk_tokens=[1] * tokens,
                finish_reason=None if failed else "length",
                http_status=200,
                error_class=ErrorClass.IDLE_TIMEOUT if failed else None,
                error_message="no chunk for 30 s — délai dépassé" if failed else None,
                draft_n=tokens if i % 2 else None,
                draft_accepted=tokens // 2 if i % 2 else None,
                server_prefill_ms=rng.uniform(5, 50),
                server_decode_ms=t * 1000,
            )
        )
    return pool


def load_step(runner, data: dict) -> None:
    worker = max(runner.worker_index, 0)
    shipper_class = RecordShipper if data["path"] == "new" else DictShipper
    shipper = shipper_class(CountingRunner(runner, data["step"]), worker)
    pool = synthetic(data["tokens"], worker)
    gevent.sleep(max(0.0, data["start"] - time.time()))
    shipper.start()
    t0, added = time.time(), 0
    burst = int(data["rate"] * 5 * ADD_TICK_S) + 1  # a worker that falls behind sends less, not later
    while (elapsed := time.time() - t0) < data["seconds"]:
        for _ in range(min(int(data["rate"] * elapsed) - added, burst)):
            record = pool[added % len(pool)]
            record.request_id, record.seq = f"{data['step']}-{worker}-{added}", added
            offsets = record.chunk_offsets
            record.t_send = time.time() - offsets[-1]
            record.t_first, record.t_end = record.t_send + offsets[0], record.t_send + offsets[-1]
            record.t_done = record.t_end
            shipper.add(record)
            added += 1
        gevent.sleep(ADD_TICK_S)
    shipper.stop()  # the final batch


def worker_main(port: int, sizes: list[int]) -> int:
    logging.basicConfig(level=logging.WARNING)
    runner = Environment(events=Events()).create_worker_runner("127.0.0.1", port)
    for tokens in sizes:  # before any step: drawing the records is not what a worker does in a run
        synthetic(tokens, max(runner.worker_index, 0))
    runner.register_message(STEP_MESSAGE, lambda environment, msg, **_kw: gevent.spawn(load_step, runner, msg.data))
    gevent.socket.wait_read(sys.stdin.fileno())  # the master closes our stdin (or dies): time to go
    os._exit(0)


# --- master (this process) -------------------------------------------------------------------------------------


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def host_busy_s() -> float:
    """CPU seconds every process on this machine has used (the benchmark's own included)."""
    times = psutil.cpu_times()._asdict()
    # Linux counts guest time inside user time already; idle and iowait are no process's.
    return sum(times.values()) - sum(times.get(k, 0.0) for k in ("idle", "iowait", "guest", "guest_nice"))


class Master:
    def __init__(self, workers: int, sizes: str, work: Path):
        self.work = work
        self.env = Environment(events=Events())
        self.runner = self.env.create_master_runner("127.0.0.1", 0)
        plugin.state_of(self.env).experiment = self  # the plugin's handler hands batches to ``self.recorder``
        self.recorder: Recorder | None = None  # one per step; workers send nothing before their first step
        self.runner.register_message(RECORDS_MESSAGE, plugin.on_records_message)
        self.sent: dict[tuple[int, int], list[tuple[float, int, bool]]] = {}  # (step, pid) -> (t, sent total, final)
        command = [sys.executable, __file__, "--worker-of", str(self.runner.server.port), "--tokens", sizes]
        self.procs = [
            subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO) for _ in range(workers)
        ]
        for proc in self.procs:
            gevent.spawn(self._read, proc)
        deadline = time.time() + 60
        while len(self.runner.clients) < workers:
            if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                raise SystemExit(f"only {len(self.runner.clients)} of {workers} workers connected")
            gevent.sleep(0.1)
        self.clients = sorted(self.runner.clients, key=self.runner.get_worker_index)
        self.step = 0

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            report = json.loads(line)
            self.sent.setdefault((report["step"], proc.pid), []).append((report["t"], report["sent"], report["final"]))

    def close(self) -> None:
        for proc in self.procs:
            proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()

    def run_step(
        self, tokens: int, workers: int, rate: float, path: str, seconds: float, profile: cProfile.Profile | None = None
    ) -> dict:
        self.step += 1
        step = self.step
        self.recorder = recorder = Recorder(self.work / f"step-{step}")
        start = time.time() + 0.3
        for i, client in enumerate(self.clients[:workers]):  # the workers' ship times spread over the second
            self.runner.send_message(
                STEP_MESSAGE,
                {
                    "step": step,
                    "tokens": tokens,
                    "path": path,
                    "seconds": seconds,
                    "rate": rate / workers,
                    "start": start + i / workers,
                },
                client_id=client,
            )
        stall = [0.0]

        def probe() -> None:
            while True:
                t = time.perf_counter()
                gevent.sleep(0.01)
                stall[0] = max(stall[0], time.perf_counter() - t - 0.01)

        prober = gevent.spawn(probe)
        gevent.sleep(max(0.0, start - time.time()))
        if profile:
            profile.enable()
        cpu0, host0 = cpu_s(), host_busy_s()
        busy0 = {p.pid: sum(psutil.Process(p.pid).cpu_times()[:2]) for p in self.procs}
        samples = []  # (t, records taken in)
        end = start + 1 + seconds + 1
        while True:
            gevent.sleep(0.05)
            taken = recorder.parts.rows_written + recorder.parts.rows_lost + recorder.parts.pending
            samples.append((time.time(), taken))
            finals = [r[-1] for (s, _), r in self.sent.items() if s == step and r[-1][2]]
            if len(finals) == workers and taken >= sum(f[1] for f in finals):
                break
            if time.time() > end + DRAIN_MAX_S:
                break
        cpu, host = cpu_s() - cpu0, host_busy_s() - host0
        if profile:
            profile.disable()
        prober.kill()
        spent = {p.pid: sum(psutil.Process(p.pid).cpu_times()[:2]) - busy0[p.pid] for p in self.procs}
        # The workers of this step are those whose batches came (the batch names its sender's pid).
        busy = sum(spent[pid] for pid in recorder.worker_pids())
        others = host - cpu - sum(spent.values())  # a neighbour on a shared machine shows here
        shipped, last = [], {}  # every batch of this step: (when it was sent, its records), over all workers
        for (s, pid), reports in self.sent.items():
            if s == step:
                for t, total, _ in reports:
                    shipped.append((t, total - last.get(pid, 0)))
                    last[pid] = total
        shipped.sort()
        times = [t for t, _ in shipped]
        counts = list(itertools.accumulate(n for _, n in shipped))  # records sent by times[i]
        sent = counts[-1] if counts else 0
        waits, backlog = [0.0], [0]
        for t, taken in samples:  # the oldest record not yet taken in: how long ago it was sent
            due = bisect.bisect_right(times, t)
            backlog.append((counts[due - 1] if due else 0) - taken)
            oldest = bisect.bisect_right(counts, taken)
            if oldest < len(counts) and times[oldest] <= t:
                waits.append(t - times[oldest])
        taken = samples[-1][1]
        while recorder.received() < sent and time.time() < end + 2 * DRAIN_MAX_S:
            gevent.sleep(0.1)  # nothing of this step may spill into the next
        if recorder.received() < sent:
            print(f"    ({sent - recorder.received()} records of this step still in flight: the next may see them)")
        recorder._loop.kill()  # no merge: the step's part files are thrown away
        shutil.rmtree(recorder.run_dir, ignore_errors=True)
        gc.collect()
        return {
            "tokens": tokens,
            "workers": workers,
            "path": path,
            "offered": rate,
            "seconds": seconds,
            "sent_rps": sent / seconds,
            "taken_rps": taken / seconds,
            "sent": sent,
            "taken": taken,
            "max_wait_s": max(waits),
            "max_backlog": max(backlog),
            "keeps_up": taken >= sent and max(waits) <= KEEP_UP_WAIT_S,
            "master_cpu_s_per_1k": cpu / taken * 1e3 if taken else math.nan,
            "master_cpu_pct": cpu / (samples[-1][0] - start) * 100,
            "others_cpu_pct": max(others, 0.0) / (samples[-1][0] - start) * 100,
            "workers_cpu_s_per_1k": busy / sent * 1e3 if sent else math.nan,
            "stall_ms": stall[0] * 1e3,
        }


COLUMNS = [
    ("tokens", "tokens", "{:>6d}"),
    ("workers", "workers", "{:>7d}"),
    ("path", "path", "{:>4s}"),
    ("offered", "offered rec/s", "{:>13.0f}"),
    ("sent_rps", "sent rec/s", "{:>10.0f}"),
    ("taken_rps", "taken in rec/s", "{:>14.0f}"),
    ("max_wait_s", "max wait s", "{:>10.2f}"),
    ("max_backlog", "max backlog", "{:>11d}"),
    ("master_cpu_s_per_1k", "master CPU s/1k", "{:>15.4f}"),
    ("master_cpu_pct", "master CPU %", "{:>12.0f}"),
    ("workers_cpu_s_per_1k", "workers CPU s/1k", "{:>16.4f}"),
    ("stall_ms", "loop stall ms", "{:>13.0f}"),
    ("others_cpu_pct", "others' CPU %", "{:>13.0f}"),
    ("keeps_up", "keeps up", "{!s:>8}"),
]


def show(row: dict) -> None:
    print("  ".join(fmt.format(row[key]).rjust(len(title)) for key, title, fmt in COLUMNS), flush=True)


def first_rate(probe: dict, cores: int) -> float:
    """Somewhat below where this configuration should saturate: the master on one core, or the host's cores."""
    master = 1e3 / probe["master_cpu_s_per_1k"]
    host = cores * 1e3 / (probe["master_cpu_s_per_1k"] + probe["workers_cpu_s_per_1k"])
    return 0.8 * min(master, host)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", default="64,256,1024", help="output tokens per record, one chunk per token")
    parser.add_argument("--workers", default="1,4,8", help="numbers of synthetic workers")
    parser.add_argument("--seconds", type=float, default=2.0, help="load per step")
    parser.add_argument(
        "--probe-tok-s",
        type=float,
        default=1_000_000,
        help="tokens/s of each configuration's first steps (old and new path)",
    )
    parser.add_argument("--max-steps", type=int, default=3, help="ladder steps per configuration and path")
    parser.add_argument("--ladder", default="new", help="the paths whose rates are walked up (old,new)")
    parser.add_argument("--quick", action="store_true", help="4 workers, one ladder step per size (~30 s)")
    parser.add_argument("--profile", action="store_true", help="print where the master's time goes, per path")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--worker-of", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_of:
        return worker_main(args.worker_of, [int(t) for t in args.tokens.split(",")])
    if args.quick:
        args.workers, args.max_steps = "4", 1
    sizes = [int(t) for t in args.tokens.split(",")]
    counts = [int(w) for w in args.workers.split(",")]
    ladders = args.ladder.split(",")
    logging.basicConfig(level=logging.WARNING)
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="master-ingest-"))
    started = time.monotonic()
    master = Master(max(counts), args.tokens, work)
    rows, profiles = [], {}
    try:
        print(
            f"master pid {os.getpid()}, {max(counts)} worker processes, {cores} CPUs; steps of {args.seconds:g} s; "
            f"keeps up = every record taken in, none waiting > {KEEP_UP_WAIT_S:g} s",
            flush=True,
        )
        print("  ".join(title for _, title, _ in COLUMNS), flush=True)
        for tokens in sizes:
            for workers in counts:
                rate = args.probe_tok_s / tokens
                probes = {path: master.run_step(tokens, workers, rate, path, args.seconds) for path in PATHS}
                for row in probes.values():
                    rows.append(row)
                    show(row)
                ratio = probes["old"]["master_cpu_s_per_1k"] / probes["new"]["master_cpu_s_per_1k"]
                print(f"    same rate, old/new master CPU per record: {ratio:.1f}x", flush=True)
                for path in ladders:
                    rate = first_rate(probes[path], cores)
                    for _ in range(args.max_steps):
                        row = master.run_step(tokens, workers, rate, path, args.seconds)
                        rows.append(row)
                        show(row)
                        if not row["keeps_up"]:
                            break
                        rate *= LADDER_FACTOR
            if args.profile:
                for path in ("old", "new"):
                    profile = profiles[(tokens, path)] = cProfile.Profile(time.process_time)  # CPU, not waits
                    master.run_step(tokens, counts[-1], args.probe_tok_s / tokens, path, args.seconds, profile)
    finally:
        master.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.monotonic() - started:.0f} s")
    summary(rows)
    for (tokens, path), profile in profiles.items():
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(12)
        print(f"\n--- where the master's time went: {path} path, {tokens} tokens per record ---")
        lines = out.getvalue().splitlines()
        print("\n".join(lines[next(i for i, line in enumerate(lines) if "ncalls" in line) :]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def summary(rows: list[dict]) -> None:
    print(
        "\nper size and workers: master CPU per 1,000 records at the first (same) rate, old and new path; the "
        "highest rate each ladder kept up with and the lowest where it fell behind"
    )
    for tokens, workers in sorted({(r["tokens"], r["workers"]) for r in rows}):
        mine = [r for r in rows if (r["tokens"], r["workers"]) == (tokens, workers)]
        old, new = (next(r for r in mine if r["path"] == path) for path in PATHS)
        line = (
            f"  {tokens:>5} tokens, {workers} workers: CPU s/1k old {old['master_cpu_s_per_1k']:.4f}, new "
            f"{new['master_cpu_s_per_1k']:.4f} ({old['master_cpu_s_per_1k'] / new['master_cpu_s_per_1k']:.1f}x)"
        )
        for path in PATHS:
            steps = [r for r in mine if r["path"] == path]
            if len(steps) < 2:
                continue  # no ladder for this path
            held = max((r for r in steps if r["keeps_up"]), key=lambda r: r["taken_rps"], default=None)
            failed = min((r for r in steps if not r["keeps_up"]), key=lambda r: r["offered"], default=None)
            line += f"; {path}: keeps up with {held['taken_rps'] if held else 0:,.0f} records/s"
            if held and held["sent_rps"] < 0.95 * held["offered"]:
                line += f" (of {held['offered']:,.0f} offered: the workers could not send more)"
            if failed:
                line += (
                    f", not with {failed['offered']:,.0f} (took in {failed['taken_rps']:,.0f}/s, waits up to "
                    f"{failed['max_wait_s']:.1f} s, master CPU {failed['master_cpu_pct']:.0f}%, other processes "
                    f"{failed['others_cpu_pct']:.0f}%)"
                )
            else:
                line += " (the highest rate tried)"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
