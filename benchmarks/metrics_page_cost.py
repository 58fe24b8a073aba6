"""What a 50 MB ``/metrics`` page costs the load generator, against a normal page, in one run on one machine.

Two reference servers with the same schedule, each behind a front (``tests/misbehaving.Front``) that serves its
``/metrics``: one a normal vLLM page, the other 50 MB a poll (over the 8 MiB cap: never read whole, a named gap).
One interleaved run measures both as two variants already running (``--variant normal=URL,huge=URL``), so the
same client, machine and minutes carry both. Per variant: steady requests, TTFT P50/P99, the client's validity, and
the telemetry's gaps; then the huge page's output tok/s and TTFT speed-ups against the normal one (an A/A in all
but the page: 1 within the interval when the page costs the load nothing).

    python benchmarks/metrics_page_cost.py [--step-duration 8] [--users 4]

Loopback only; about a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import locust  # noqa: F401  (gevent's patching: the fronts serve while the run's subprocess is waited on)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import RefServerProcess, run_locust  # noqa: E402
from tests.misbehaving import Front  # noqa: E402

NORMAL = (
    b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
    b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
)
HUGE = NORMAL + b"# " + b"x" * 1000 + b"\n" * 50_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step-duration", type=float, default=8.0)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    timing = ("--ttft-s", "0.02", "--gap-s", "0.01")
    servers = [RefServerProcess(*timing), RefServerProcess(*timing)]
    try:
        with (
            Front(servers[0].url, metrics=lambda k: NORMAL) as normal,
            Front(servers[1].url, metrics=lambda k: HUGE) as huge,
            tempfile.TemporaryDirectory(prefix="metrics-page-") as tmp,
        ):
            folder = Path(tmp)
            scenario = folder / "pages.yaml"
            scenario.write_text(
                "name: pages\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {any: {}}\n"
                f"load: {{ladder: [{args.users}], repeats: 2, step_duration_s: {args.step_duration}, warmup_s: 1, "
                "max_tokens: 32, prompt_tokens: 16}\n"
            )
            done = run_locust(
                folder,
                "--scenario",
                str(scenario),
                "--variant",
                f"normal={normal.url},huge={huge.url}",
                "--run-id",
                "pages",
                timeout=600,
            )
            run = folder / "pages"
            summary = json.loads((run / "summary.json").read_text())
            telemetry = json.loads((run / "telemetry.json").read_text())
            served = f"normal {normal.metric_pages}, huge {huge.metric_pages}"
            print(f"exit {done.returncode}; /metrics pages served: {served}")
            for name, entry in summary["variants"].items():
                for step in entry["steps"]:
                    ttft = step["ttft_ms"]
                    print(
                        f"{name:>6} step {step['step']}: {step['requests']} requests, TTFT P50 {ttft['p50']:.1f} ms "
                        f"P99 {ttft['p99']:.1f} ms, client valid {step['client_valid']}, status {step['status']}"
                    )
            gaps = [g["error"][:100] for g in telemetry["gaps"]]
            print(f"telemetry gaps: {len(gaps)} ({'; '.join(sorted(set(gaps)))})")
            (comparison,) = summary["comparisons"]
            (level,) = comparison["steps"]
            for figure in ("output_tps_speedup", "ttft_p95_speedup", "tpot_p50_speedup"):
                ratio = level[figure]
                ci = ratio["ci95"]
                print(f"huge vs normal {figure}: {ratio['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
