"""A server with a fixed number of slots: saturation and knee where the slots run out, every step's throughput
interval positive and covering the server's own schedule. A real headless run against the reference server.

The reference server with ``--slots 4`` serves at most 4 streams at once (the rest wait, FIFO); each stream takes
``TTFT_S + (TOKENS - 1) * GAP_S`` of the server's time. So at ``L`` users the throughput is
``min(L, 4) * TOKENS / cycle``: past 4 users the slots are never idle and the cycle is the service time alone;
up to 4 each user's cycle is the service time plus the client's gap between its requests (taken from the records:
the time from a request's end to the same user's next send).
"""

import json

import numpy as np
import pandas as pd

from tests.helpers import assert_run_completed, run_locust

SLOTS, TTFT_S, GAP_S, TOKENS = 4, 0.05, 0.01, 20
SERVICE_S = TTFT_S + (TOKENS - 1) * GAP_S
LADDER = [1, 2, 4, 8, 16]

# Steady windows of 24 s: a level's interval is at least a count's spread (1 / sqrt(tokens)); at 4 and 8 users they
# hold some 7,900 tokens (1.1%), so a 4->8 gain of +0.6% has a 95% upper bound near 4.1% (measured), under the 5% that
# calls a level saturated (12 s windows: 4.4% at best, and saturation was called at 8 in CI).
SCENARIO = f"""
name: slots
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  mode: closed
  ladder: {LADDER}
  step_duration_s: 24
  warmup_s: 1
  max_extend_s: 6
  prompt_tokens: 16
  max_tokens: {TOKENS}
"""


def client_gap_s(frame: pd.DataFrame, step: int) -> float:
    """Mean time from a request's end to its user's next send in the step (the client's share of a cycle)."""
    rows = frame[frame["step"] == step].sort_values(["worker", "user", "t_send"])
    following = rows.groupby(["worker", "user"])["t_send"].shift(-1)
    gaps = (following - rows["t_done"]).dropna()
    return float(gaps.mean())


def test_a_four_slot_server_saturates_and_bends_at_four(tmp_path, refserver_factory):
    server = refserver_factory("--slots", str(SLOTS), "--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))
    scenario = tmp_path / "slots.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", "slots", timeout=600)
    assert_run_completed(done)
    run = tmp_path / "slots"
    summary = json.loads((run / "summary.json").read_text())
    frame = pd.read_parquet(run / "requests.parquet")
    assert (frame["user"] >= 0).all()  # every closed-loop request names its user
    entry = summary["variants"]["ref"]
    lines = []
    for step in entry["steps"]:
        level = int(step["level"])
        cycle = SERVICE_S if level > SLOTS else SERVICE_S + client_gap_s(frame, step["step"])
        truth = min(level, SLOTS) * TOKENS / cycle
        lo, hi = step["output_tps_ci95"]
        lines.append(f"{level}: {step['output_tps']:.1f} [{lo:.1f}, {hi:.1f}] tok/s, truth {truth:.1f}")
        assert step["throughput"]["method"] == "cycles"
        assert 0 < lo <= truth <= hi, lines
    print("; ".join(lines))
    print(entry["saturation"]["text"], "|", entry["knee"]["text"])
    assert entry["saturation_level"] == SLOTS and entry["saturation"]["status"] == "reached", entry["saturation"]
    assert entry["knee_level"] == SLOTS and entry["knee"]["status"] == "reached", entry["knee"]
    assert np.isclose(
        sum(s["output_tokens"] for s in entry["steps"]),
        sum(s["output_tps"] * s["throughput"]["covered_s"] for s in entry["steps"]),
    )  # one edge rule: the tokens counted are the ones the rate divides
