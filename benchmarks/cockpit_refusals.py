"""Does a page of another origin, looping on requests the cockpit refuses, slow the cockpit or the load?

One run of the project's locustfile with its web UI (``--autostart``), against the reference server, twice: once
undisturbed and once while ``--hostile`` threads loop on ``GET /llm/<8,000 letters>`` with ``Sec-Fetch-Site:
cross-site`` (what a page of another origin sends with ``no-cors``; each is refused with 403). Meanwhile a same-origin
poller times ``GET /llm/live`` every 100 ms. Prints, per run, the ``/llm/live`` latency (P50, P99, max), the
refused requests sent, and the step's TTFT P50/P99 from ``summary.json``.

    python benchmarks/cockpit_refusals.py [--hostile 4] [--step-duration 10] [--users 4]

``PYTHONPATH`` chooses the code measured (a checkout of an earlier commit gives the "before"). Loopback only; about
a minute on two cores.
"""

from __future__ import annotations  # noqa: I001  (locust first: it monkey-patches)

import locust  # noqa: F401  (gevent patches the standard library before requests is imported)

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import LOCUSTFILE, RefServerProcess  # noqa: E402

LETTERS = "a" * 8000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hostile(ui: str, stop: threading.Event, sent: list[int]) -> None:
    headers = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "http://evil.example"}
    with requests.Session() as session:
        while not stop.is_set():
            try:
                session.get(f"{ui}/llm/{LETTERS}", headers=headers, timeout=30)
                sent[0] += 1
            except requests.RequestException:
                time.sleep(0.05)


def poll_live(ui: str, stop: threading.Event, latencies: list[float]) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            start = time.perf_counter()
            try:
                if session.get(f"{ui}/llm/live", timeout=30).status_code == 200:
                    latencies.append((time.perf_counter() - start) * 1e3)
            except requests.RequestException:
                pass
            time.sleep(0.1)


def one_run(folder: Path, run_id: str, scenario: Path, host: str, threads: int, quit_after_s: int) -> None:
    port = free_port()
    ui = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--autostart", "--autoquit", "5"]
    command += ["--web-host", "127.0.0.1", "--web-port", str(port), "--report-dir", str(folder)]
    command += ["--scenario", str(scenario), "--host", host, "--run-id", run_id]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop, latencies, sent = threading.Event(), [], [0]
    workers = [threading.Thread(target=poll_live, args=(ui, stop, latencies))]
    workers += [threading.Thread(target=hostile, args=(ui, stop, sent)) for _ in range(threads)]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(f"{ui}/llm/live", timeout=2)
                break
            except requests.RequestException:
                time.sleep(0.2)
        for worker in workers:
            worker.start()
        proc.wait(timeout=quit_after_s)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
    summary = json.loads((folder / run_id / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    live = np.array(latencies)
    print(
        f"{run_id:>11}: {threads} hostile thread(s), {sent[0]} refused requests sent; /llm/live "
        f"P50 {np.percentile(live, 50):.1f} ms, P99 {np.percentile(live, 99):.1f} ms, max {live.max():.1f} ms "
        f"(n={len(live)}); TTFT P50 {step['ttft_ms']['p50']:.1f} ms, P99 {step['ttft_ms']['p99']:.1f} ms "
        f"({step['requests']} requests)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hostile", type=int, default=4, help="threads looping on refused requests")
    parser.add_argument("--step-duration", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    server = RefServerProcess("--ttft-s", "0.03", "--gap-s", "0.005")
    try:
        with tempfile.TemporaryDirectory(prefix="cockpit-refusals-") as tmp:
            folder = Path(tmp)
            scenario = folder / "cockpit.yaml"
            scenario.write_text(
                "name: cockpit\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {ref: {}}\n"
                f"load: {{ladder: [{args.users}], step_duration_s: {args.step_duration}, warmup_s: 1, "
                "max_tokens: 16, prompt_tokens: 32}\n"
            )
            limit = int(args.step_duration) + 120
            one_run(folder, "undisturbed", scenario, server.url, 0, limit)
            one_run(folder, "hostile", scenario, server.url, args.hostile, limit)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
