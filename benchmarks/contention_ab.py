"""A/B on a shared machine: the default scenario quiet and next to a neighbour that burns CPU only while the
baseline server is alive (one core, 0.5 s on / 0.5 s off: ``locust_llm.testing.burner``).

For each case it prints the exit code, the run's wall time, and per level the status and the output-tok/s
speed-up with its 95% CI. The cases:

* quiet, interleaved (the default) and quiet, sequential: the same measurement time, so the difference in wall
  time is what interleaving costs (block drains, both servers started first);
* busy, sequential and busy, interleaved, each with contention detection off (``load.contention_cores`` raised
  out of reach): what the speed-up would be without it. Sequentially the neighbour hits only the baseline;
  interleaved, the baseline server lives for the whole run, so the neighbour hits both sides alike;
* busy, interleaved, detection on (the default): the run exits 5 and names the neighbour.

It also measures how much CPU an idle llama-server of the default scenario takes while the other one serves
(interleaving keeps both up).

    python benchmarks/contention_ab.py [--ladder 1,4] [--cases quiet-interleaved,quiet-sequential,...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "scenarios" / "tiny-cpu.yaml"
CASES = {  # name -> (order, burner, detection)
    "quiet-interleaved": ("interleaved", False, True),
    "quiet-sequential": ("sequential", False, True),
    "busy-sequential-undetected": ("sequential", True, False),
    "busy-interleaved-undetected": ("interleaved", True, False),
    "busy-interleaved": ("interleaved", True, True),
}


def run_case(work: Path, name: str, ladder: str) -> dict:
    order, busy, detect = CASES[name]
    scenario = DEFAULT
    if not detect:
        scenario = work / f"{name}.yaml"
        text = DEFAULT.read_text().replace("  mode: closed\n", "  mode: closed\n  contention_cores: 1000\n")
        scenario.write_text(text)
    burner = (
        subprocess.Popen(
            [sys.executable, "-m", "locust_llm.testing.burner", "--max-s", "1800"], cwd=REPO, start_new_session=True
        )
        if busy
        else None
    )
    started = time.monotonic()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                "locustfiles/spec_decode.py",
                "--headless",
                "--skip-log",
                "--scenario",
                str(scenario),
                "--ladder",
                ladder,
                "--order",
                order,
                "--report-dir",
                str(work),
                "--run-id",
                name,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    wall = time.monotonic() - started
    summary = json.loads((work / name / "summary.json").read_text())
    verdict = json.loads((work / name / "verdict.json").read_text())
    return {"name": name, "exit": done.returncode, "wall_s": wall, "summary": summary, "verdict": verdict}


def idle_server_cpu(seconds: float = 10.0) -> float:
    """Cores an idle llama-server of the default scenario uses while the other one answers a stream of requests."""
    import requests

    from locust_llm.scenario import load_scenario
    from locust_llm.servers import launch_variant

    scenario = load_scenario(DEFAULT)
    with tempfile.TemporaryDirectory() as logs:
        idle = launch_variant(scenario, "spec-k4", log_dir=Path(logs))
        busy = launch_variant(scenario, "baseline", log_dir=Path(logs))
        try:
            proc = psutil.Process(idle.proc.pid)
            before = sum(proc.cpu_times()[:2])
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                requests.post(f"{busy.base_url}/v1/completions", json={"prompt": "hello", "max_tokens": 64}, timeout=60)
            return (sum(proc.cpu_times()[:2]) - before) / seconds
        finally:
            idle.stop()
            busy.stop()


def show(result: dict) -> None:
    comp = result["summary"]["comparisons"][0]
    print(f"\n{result['name']}: exit {result['exit']}, wall {result['wall_s']:.0f} s")
    for step in comp["steps"]:
        fig = step["output_tps_speedup"]
        ci = f"[{fig['ci95'][0]:.2f}, {fig['ci95'][1]:.2f}]" if fig.get("ci95") else "-"
        value = f"{fig['value']:.2f}x" if fig.get("value") else "-"
        print(f"  level {step['level']:>4g}: {step['status']:<13} speed-up {value:>6} CI {ci}")
    print(f"  recommendation: {comp['recommendation']}")
    for reason in result["verdict"]["reasons"].get("5", []):
        print(f"  [exit 5] {reason[:300]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ladder", default="1,4")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"idle llama-server while the other serves: {idle_server_cpu():.3f} cores")
    with tempfile.TemporaryDirectory() as work:
        for name in args.cases.split(","):
            show(run_case(Path(work), name, args.ladder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
