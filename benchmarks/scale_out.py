"""How close is the scale-out slope to the truth, on servers whose capacity is known?

Reference servers with ``--slots K`` serve at most K streams at a time: one server's goodput is K / (TTFT + (n - 1)
x gap), two separate servers serve twice that (slope 2), one server reached through two URLs serves the same
(slope 1). Each case is a real headless run (``--processes 2``, closed loop, loopback only); the truth of one
server's goodput is read from its own log (its service time per slot). Prints measured against truth, side by side.

    python benchmarks/scale_out.py --step 20 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import RefServerProcess, run_locust  # noqa: E402

SCENARIO = """
name: scale-bench
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load: {{mode: closed, ladder: [{level}], step_duration_s: {step}, warmup_s: 2, prompt_tokens: 16, max_tokens: {tokens}}}
scale_out: {{level: {level}, pairs: {pairs}}}
"""


def service_s(server: RefServerProcess) -> float:
    logs = [log for log in server.all_logs() if log["complete"] and log.get("t_slot") is not None]
    return float(np.median([log["chunks"][-1][0] - log["t_slot"] for log in logs]))


def measure(args, shared: bool, work: Path) -> dict:
    flags = ("--slots", str(args.slots), "--ttft-s", str(args.ttft), "--gap-s", str(args.gap))
    first = RefServerProcess(*flags)
    second = first if shared else RefServerProcess(*flags)
    try:
        scenario = work / "scale.yaml"
        scenario.write_text(SCENARIO.format(level=2 * args.slots, step=args.step, tokens=args.tokens, pairs=args.pairs))
        other = f"http://localhost:{first.port}" if shared else second.url
        run_id = "shared" if shared else "separate"
        done = run_locust(
            work,
            "--host",
            first.url,
            "--scale-out-urls",
            other,
            "--scenario",
            str(scenario),
            "--run-id",
            run_id,
            "--processes",
            "2",
            timeout=3600,
        )
        (scale,) = json.loads((work / run_id / "summary.json").read_text())["scale_out"]["variants"]
        return {
            "case": "one server, two URLs" if shared else "two servers",
            "exit": done.returncode,
            "slope_truth": 1.0 if shared else 2.0,
            "slope": scale["slope"],
            "slope_ci95": scale["slope_ci95"],
            "one_truth": args.slots / service_s(first),
            "one": scale["one_goodput_rps"],
            "one_ci95": scale["one_goodput_rps_ci95"],
            "scaling": scale["scaling"],
            "pairs": scale["pairs"],
        }
    finally:
        first.stop()
        if second is not first:
            second.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=float, default=20.0, help="steady window per step, s")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--gap", type=float, default=0.01)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(args, shared, Path(tmp)) for shared in (False, True)]
    for row in rows:
        ci, one_ci = row["slope_ci95"] or [float("nan")] * 2, row["one_ci95"] or [float("nan")] * 2
        print(
            f"{row['case']:<22} exit {row['exit']}  slope {row['slope']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] truth "
            f"{row['slope_truth']:.1f} ({row['scaling']}, {row['pairs']} pairs); one server {row['one']:.3f} req/s "
            f"[{one_ci[0]:.3f}, {one_ci[1]:.3f}] truth {row['one_truth']:.3f} "
            f"({100 * (row['one'] / row['one_truth'] - 1):+.1f}%)"
        )


if __name__ == "__main__":
    main()
