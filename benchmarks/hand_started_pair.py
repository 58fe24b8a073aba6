"""The plugin-launched pair against the same two llama-servers started by hand: do the speed-ups agree?

Reads a finished run of the default scenario (the README's main command: the plugin started the baseline and the
speculative llama-server), starts the same two commands by hand (the same binary, model files, flags and nice value
as its env.json records, on new loopback ports), runs the same scenario against them with
``--variant baseline=URL,spec-k4=URL`` (two servers already running, interleaved and paired like launched
variants), and prints per level the two runs' output tok/s speed-ups with their 95% intervals side by side.

    python benchmarks/hand_started_pair.py reports/<run-id> [--scenario scenarios/tiny-cpu.yaml]

Loopback only; as long as the run it repeats (some six minutes for the default on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locust_llm.servers.base import free_port  # noqa: E402
from tests.helpers import LOCUSTFILE  # noqa: E402


def start(command: list[str], nice: int | None, log: Path) -> tuple[subprocess.Popen, str]:
    """The recorded command on a new port (its ``--port`` value replaced), niced as the plugin did."""
    port = free_port()
    argv = list(command)
    argv[argv.index("--port") + 1] = str(port)
    prefix = ["nice", "-n", str(nice)] if nice else []
    process = subprocess.Popen(prefix + argv, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{argv[0]} did not become ready in 300 s (log: {log})")


def speedups(run: Path) -> dict[float, tuple[float | None, list[float] | None, str]]:
    summary = json.loads((run / "summary.json").read_text())
    (comparison,) = summary["comparisons"]
    return {
        s["level"]: (s["output_tps_speedup"]["value"], s["output_tps_speedup"]["ci95"], s["status"])
        for s in comparison["steps"]
    }


def shown(figure: tuple[float | None, list[float] | None, str]) -> str:
    value, ci, status = figure
    if value is None:
        return f"- ({status})"
    return f"{value:.3f}x [{ci[0]:.3f}, {ci[1]:.3f}] {status}" if ci else f"{value:.3f}x (no CI) {status}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("launched", type=Path, help="a finished run whose servers the plugin started")
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "tiny-cpu.yaml")
    args = parser.parse_args()
    env = json.loads((args.launched / "env.json").read_text())
    names = list(env["servers"])
    report_dir = args.launched.parent
    run_id = args.launched.name + "-by-hand"
    servers = []
    try:
        urls = []
        for name in names:
            server = env["servers"][name]
            process, url = start(server["command"], server.get("nice"), report_dir / f"{run_id}-{name}.log")
            servers.append(process)
            urls.append(f"{name}={url}")
        done = subprocess.run(
            [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--skip-log"]
            + ["--scenario", str(args.scenario), "--variant", ",".join(urls)]
            + ["--report-dir", str(report_dir), "--run-id", run_id],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=3600,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        print(done.stderr[-3000:])
    finally:
        for process in servers:
            process.terminate()
            process.wait(timeout=30)
    launched, by_hand = speedups(args.launched), speedups(report_dir / run_id)
    print(f"{'level':>6}  {'plugin-launched':<36} {'started by hand':<36}")
    for level in sorted(set(launched) | set(by_hand)):
        missing = (None, None, "not measured")
        print(f"{level:>6g}  {shown(launched.get(level, missing)):<36} {shown(by_hand.get(level, missing)):<36}")


if __name__ == "__main__":
    main()
