"""Two identical runs, one after the other, against a server with a prompt cache it does not report: does the
second run measure the server or the first run's cache?

The reference server runs with a prefix cache of 16-word blocks that says nothing (``--cache-unreported``: no
``cached_tokens`` in usage, no ``/metrics``) and a prefill of ``--prefill-ms`` per uncached prompt token, so a
cached prompt's TTFT is visibly shorter. The project's locustfile runs the same external scenario twice (same
seed, same ladder), by default with each run's own prompts (a per-run nonce in every marker), and with
``--same-prompts`` as before per-run markers (``load.same_prompts_every_run: true``: identical bytes each run).
It prints each run's TTFT P50 and P95 of the steady window (``summary.json``), and how many of the second run's
steady prompts the first run sent, with the TTFT P50 of those and of the others.

    python benchmarks/repeated_runs.py [--same-prompts] [--prompt-tokens 256] [--step-duration 8]

Loopback only; about a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from tests.helpers import LOCUSTFILE, RefServerProcess  # noqa: E402


def run(report_dir: Path, run_id: str, scenario: Path, host: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--skip-log", "--report-dir", str(report_dir)]
        + ["--scenario", str(scenario), "--host", host, "--run-id", run_id],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    summary = json.loads((report_dir / run_id / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    verdict = json.loads((report_dir / run_id / "verdict.json").read_text())
    why = "; ".join(r for reasons in verdict["reasons"].values() for r in reasons)
    return {"exit": done.returncode, "why": why, "requests": step["requests"], "ttft_ms": step["ttft_ms"]}


def repeated_prompts(first: Path, second: Path) -> str:
    """Of the second run's steady requests, those whose prompt the first run sent (by the prompt's hash), and the
    TTFT P50 of each kind: a second run that goes faster sends more requests than the first, so only the first part of
    its sequence can repeat the first run's prompts, and its whole-window P50 mixes both kinds."""
    sent = set(pd.read_parquet(first / "requests.parquet", columns=["prompt_hash"])["prompt_hash"])
    rows = pd.read_parquet(second / "requests.parquet")
    steady = rows[(rows["phase"] == "steady") & rows["error_class"].isna()]
    ttft = (steady["t_first"] - steady["t_send"]) * 1000
    seen = steady["prompt_hash"].isin(sent)
    parts = [f"second run: {int(seen.sum())} of {len(steady)} steady prompts were sent by the first run"]
    for label, mask in (("those", seen), ("the others", ~seen)):
        if mask.any():
            parts.append(f"{label} TTFT P50 {ttft[mask].median():.1f} ms")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--same-prompts", action="store_true", help="load.same_prompts_every_run: true")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--prefill-ms", type=float, default=0.5, help="per uncached prompt token")
    parser.add_argument("--step-duration", type=float, default=8.0)
    parser.add_argument("--users", type=int, default=2)
    args = parser.parse_args()
    prefill = str(args.prefill_ms / 1000)
    timing = ("--ttft-s", "0.01", "--gap-s", "0.005")
    server = RefServerProcess("--cache-unreported", "--prefill-s-per-token", prefill, *timing)
    try:
        with tempfile.TemporaryDirectory(prefix="repeated-runs-") as tmp:
            folder = Path(tmp)
            scenario = folder / "repeat.yaml"
            scenario.write_text(
                "name: repeat\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {ref: {}}\n"
                f"load: {{ladder: [{args.users}], step_duration_s: {args.step_duration}, warmup_s: 1, max_tokens: 8, "
                f"prompt_tokens: {args.prompt_tokens}, same_prompts_every_run: {str(args.same_prompts).lower()}}}\n"
            )
            print(
                f"refserver: prompt cache unreported, {args.prefill_ms} ms prefill per uncached token; "
                f"{args.users} users, {args.prompt_tokens}-token prompts; same_prompts_every_run: {args.same_prompts}"
            )
            for run_id in ("first", "second"):
                got = run(folder, run_id, scenario, server.url)
                ttft = got["ttft_ms"]
                print(
                    f"{run_id:>6} run: exit {got['exit']}, {got['requests']} steady requests, TTFT P50 "
                    f"{ttft['p50']:.1f} ms, P95 {ttft['p95']:.1f} ms" + (f" ({got['why']})" if got["why"] else "")
                )
            print(repeated_prompts(folder / "first", folder / "second"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
