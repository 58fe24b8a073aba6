"""The plugin-launched pair against the same two llama-servers started by hand: do the speed-ups agree?

Reads a finished run of the default scenario (the README's main command: the plugin started the baseline and the
speculative llama-server), starts the same two commands by hand (the same binary, model files, flags and nice value
as its env.json records, on new loopback ports), runs the same scenario against them with
``--variant baseline=URL,spec-k4=URL`` (two servers already running, interleaved and paired like launched
variants), and prints per level the two runs' output tok/s speed-ups with their 95% intervals side by side.

    python benchmarks/hand_started_pair.py reports/<run-id> [--scenario scenarios/tiny-cpu.yaml]

``--alternate N --report-dir D`` runs both itself, N times in turn (launched, by hand, launched, ...), so that a
machine whose speed wanders over the hour hits both alike; it prints each run's speed-up and each variant's output
tok/s and TPOT P50 per level, column by column in run order.

Loopback only; each run as long as the scenario (some six minutes for the default on two cores).
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


def figures(run: Path) -> dict[float, str]:
    """Per level: the speed-up, then each variant's output tok/s and TPOT P50 over its steps."""
    summary = json.loads((run / "summary.json").read_text())
    out = {level: shown(figure) for level, figure in speedups(run).items()}
    for name, variant in summary["variants"].items():
        for level in sorted({s["level"] for s in variant["steps"]}):
            steps = [s for s in variant["steps"] if s["level"] == level]
            tps = "/".join(f"{s['output_tps']:.0f}" for s in steps)
            tpot = "/".join(f"{s['tpot_ms']['p50']:.1f}" for s in steps if s["tpot_ms"]["p50"] is not None)
            out[level] = out.get(level, "") + f"; {name} {tps} tok/s, TPOT {tpot} ms"
    return out


def by_hand(launched: Path, scenario: Path, run_id: str) -> Path:
    """The launched run's servers started by hand, the scenario run against them; the new run's directory."""
    env = json.loads((launched / "env.json").read_text())
    report_dir = launched.parent
    servers = []
    try:
        urls = []
        for name, server in env["servers"].items():
            process, url = start(server["command"], server.get("nice"), report_dir / f"{run_id}-{name}.log")
            servers.append(process)
            urls.append(f"{name}={url}")
        locust(scenario, report_dir, run_id, "--variant", ",".join(urls))
    finally:
        for process in servers:
            process.terminate()
            process.wait(timeout=30)
    return report_dir / run_id


def locust(scenario: Path, report_dir: Path, run_id: str, *extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--skip-log", "--scenario", str(scenario)]
        + ["--report-dir", str(report_dir), "--run-id", run_id, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    print(f"{run_id}: exit {done.returncode}", flush=True)
    if not (report_dir / run_id / "summary.json").exists():
        raise SystemExit(done.stderr[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("launched", type=Path, nargs="?", help="a finished run whose servers the plugin started")
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "tiny-cpu.yaml")
    parser.add_argument("--alternate", type=int, default=0, help="launch and start by hand this many times in turn")
    parser.add_argument("--report-dir", type=Path, default=REPO / "reports")
    args = parser.parse_args()
    if args.alternate:
        runs = []
        for round_ in range(1, args.alternate + 1):
            launched = f"pair-launched-{round_}"
            locust(args.scenario, args.report_dir, launched)
            runs.append(args.report_dir / launched)
            runs.append(by_hand(runs[-1], args.scenario, f"pair-by-hand-{round_}"))
    elif args.launched is not None:
        runs = [args.launched, by_hand(args.launched, args.scenario, args.launched.name + "-by-hand")]
    else:
        raise SystemExit("give a launched run, or --alternate N")
    for run in runs:
        print(run.name)
        for level, text in sorted(figures(run).items()):
            print(f"  {level:>4g}: {text}")


if __name__ == "__main__":
    main()
