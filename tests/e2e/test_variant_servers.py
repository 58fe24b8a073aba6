"""Two servers already running, compared in one run (``--variant NAME=URL,NAME=URL``): interleaved ABBA blocks,
paired requests, and the speed-up their known schedules give.

The reference servers follow an absolute schedule (``refserver.server``): the fast one's first token and every gap
take exactly half the slow one's, so every per-token speed of the fast server is twice the slow one's.
"""

import json

import pandas as pd

from tests.helpers import assert_run_completed, run_locust

# Requests of 0.34 s and 0.68 s: the client's few milliseconds per request stay a small share of each cycle.
# Steady windows of 9 s: the slow server's hold 13 cycles per user, past the 10 a throughput interval needs.
SLOW = ("--ttft-s", "0.08", "--gap-s", "0.04")
FAST = ("--ttft-s", "0.04", "--gap-s", "0.02")
KNOWN_RATIO = 2.0

# Load settings only: --variant NAME=URL replaces the server and the variants.
SCENARIO = """
name: two-servers
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {any: {}}
load:
  mode: closed
  ladder: [2]
  repeats: 2
  step_duration_s: 9
  warmup_s: 1
  prompt_tokens: 16
  max_tokens: 16
  min_requests: 10
  contention_cores: 100  # judged against the servers' known schedules, not by what else the machine does
"""


def test_two_running_servers_are_compared_interleaved_and_paired(tmp_path, refserver_factory):
    slow, fast = refserver_factory(*SLOW), refserver_factory(*FAST)
    scenario = tmp_path / "two.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(
        tmp_path,
        "--scenario",
        str(scenario),
        "--variant",
        f"slow={slow.url},fast={fast.url}",
        "--run-id",
        "two",
        timeout=240,
    )
    assert_run_completed(done)
    run = tmp_path / "two"
    env = json.loads((run / "env.json").read_text())
    assert env["baseline"] == "slow" and env["variants"] == ["slow", "fast"]
    assert (env["servers"]["slow"]["url"], env["servers"]["fast"]["url"]) == (slow.url, fast.url)
    assert env["servers"]["slow"]["launched"] is False

    # Each server received exactly the requests of its variant: its own log, not ours.
    frame = pd.read_parquet(run / "requests.parquet")
    sent = frame[frame["t_send"].notna()]
    streams = {"slow": len(slow.all_logs()), "fast": len(fast.all_logs())}
    assert streams == {v: int((sent["variant"] == v).sum()) for v in ("slow", "fast")}, streams

    # Interleaved ABBA: slow, fast, fast, slow (the second repeat reversed).
    rows = json.loads((run / "steps.json").read_text())["steps"]
    order = [r["variant"] for r in sorted(rows, key=lambda r: r["t_start"])]
    assert order == ["slow", "fast", "fast", "slow"], order

    summary = json.loads((run / "summary.json").read_text())
    (comparison,) = summary["comparisons"]
    assert (comparison["baseline"], comparison["variant"]) == ("slow", "fast")
    (level,) = comparison["steps"]
    for figure in ("decode_tps_speedup", "tpot_p50_speedup"):
        ratio = level[figure]
        print(f"{figure}: {ratio['value']} {ratio['ci95']}, client-free {ratio['client_ci95']}, pairs {ratio['pairs']}")
        assert ratio["pairs"] and ratio["pairs"] >= 10  # the same prompts, request by request, on both servers
        # The servers' schedules are the truth of a client-free figure: the client's hundredths of a millisecond per
        # token are a bias that 40 pairs resolve (1.997 [1.995, 1.999]); the interval widened by the client's bounds
        # is the one that claims to hold the servers' own speed-up, and it still says something.
        low, high = ratio["client_ci95"]
        assert low <= KNOWN_RATIO <= high and high / low < 1.05, (figure, ratio)
    output = level["output_tps_speedup"]
    print(f"output_tps_speedup: {output['value']} {output['ci95']}, blocks {output['blocks']}")
    assert output["blocks"] == 2

    assert "different servers: slow on " + slow.url in done.stderr
    assert f"fast on {fast.url}" in (run / "report.html").read_text()
