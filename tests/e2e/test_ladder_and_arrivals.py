"""A ladder that steps down is measured with the new number of streams; constant arrivals from several load
processes interleave evenly. Real headless runs against the reference server."""

import json

import numpy as np
import pandas as pd

from tests.helpers import assert_run_completed, run_locust

SCENARIO = """
name: ladder
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  mode: MODE
  ladder: LADDER
  arrival: constant
  step_duration_s: 4
  warmup_s: 1
  prompt_tokens: 16
  max_tokens: 20
"""


def run(tmp_path, server, run_id, mode, ladder, *extra):
    scenario = tmp_path / f"{run_id}.yaml"
    scenario.write_text(SCENARIO.replace("MODE", mode).replace("LADDER", ladder))
    done = run_locust(
        tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", run_id, *extra, timeout=180
    )
    assert_run_completed(done)
    return tmp_path / run_id


def concurrency(frame: pd.DataFrame) -> int:
    """The most requests of ``frame`` in flight at once."""
    events = sorted([(t, 1) for t in frame["t_send"]] + [(t, -1) for t in frame["t_done"]])
    return int(max(np.cumsum([e for _, e in events])))


def test_stepping_down_measures_the_lower_level_with_its_own_streams(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.02", "--gap-s", "0.01")
    down = run(tmp_path, server, "down", "closed", "[4, 1]")
    single = run(tmp_path, server, "single", "closed", "[1]")
    frame = pd.read_parquet(down / "requests.parquet")
    level_one = frame[(frame["step"] == 1) & (frame["phase"] == "steady")]
    assert concurrency(level_one) == 1
    tps_down = json.loads((down / "summary.json").read_text())["variants"]["ref"]["steps"][1]["output_tps"]
    tps_single = json.loads((single / "summary.json").read_text())["variants"]["ref"]["steps"][0]["output_tps"]
    print(f"ladder 4,1: level 1 at {tps_down:.1f} tok/s with one stream; a single-stream run {tps_single:.1f}")
    assert abs(tps_down / tps_single - 1) < 0.1, (tps_down, tps_single)


def test_constant_arrivals_from_two_processes_interleave_evenly(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.01", "--gap-s", "0.002")
    rate = 4.0
    run_dir = run(tmp_path, server, "constant", "open", f"[{rate}]", "--processes", "2")
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert set(frame["worker"]) == {0, 1}
    intended = np.sort(frame.loc[frame["step"] == 0, "t_intended"].to_numpy())
    gaps = np.diff(intended)
    print(f"constant {rate:g}/s over 2 processes: intended gaps {gaps.min() * 1000:.2f}-{gaps.max() * 1000:.2f} ms")
    assert np.all(np.abs(gaps - 1 / rate) < 0.01 / rate), gaps
