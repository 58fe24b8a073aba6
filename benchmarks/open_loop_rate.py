"""Can one load process hold an open-loop rate? Schedule lag and achieved rate at a ladder of rates.

Runs the project's locustfile headless, one process, open loop with constant arrivals, against the reference
server (short answers: 8 tokens, TTFT 10 ms, 5 ms between chunks), and prints per rate: the P50/P99 schedule
lag (send time minus intended time), achieved / offered rate, errors, and the client's CPU (% of one core).
Goal: 500 req/s from one process with a P99 lag under 5 ms and the achieved rate within 1%.

    python benchmarks/open_loop_rate.py [--rates 100,250,500] [--seconds 15]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_accuracy import RefServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="100,250,500")
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    server = RefServer(["--ttft-s", "0.01", "--gap-s", "0.005", "--tokens-per-chunk", "1"])
    try:
        with tempfile.TemporaryDirectory() as work:
            scenario = Path(work) / "open.yaml"
            scenario.write_text(
                textwrap.dedent(f"""
                name: open-rate
                server: {{engine: external, url: "{server.url}"}}
                variants: {{ref: {{}}}}
                load: {{mode: open, arrival: constant, ladder: [{args.rates}], step_duration_s: {args.seconds},
                       warmup_s: 2, prompt_tokens: 8, max_tokens: 8, max_inflight: 1024}}
            """)
            )
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "locust",
                    "-f",
                    "locustfiles/spec_decode.py",
                    "--headless",
                    "--skip-log",
                    "--host",
                    server.url,
                    "--scenario",
                    str(scenario),
                    "--report-dir",
                    work,
                    "--run-id",
                    "rate",
                ],
                cwd=REPO,
                check=False,
                capture_output=True,
            )
            summary = json.loads((Path(work) / "rate" / "summary.json").read_text())
            print(
                f"{'offered':>8} {'achieved':>9} {'lag P50 ms':>11} {'lag P99 ms':>11} {'errors':>7} {'client CPU':>11}"
            )
            for step in summary["variants"]["ref"]["steps"]:
                lag = step["schedule_lag_ms"]
                print(
                    f"{step['offered_rate']:>8g} {step['achieved_rate']:>9.2f} {lag['p50']:>11.2f} "
                    f"{lag['p99']:>11.2f} {step['errors']:>7} "
                    f"{step['client_validity']['cpu_percent_max'] or 0:>10.0f}%"
                )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
