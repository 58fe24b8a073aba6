"""The quality gate on real llama.cpp servers: the built-in task set asked of every variant before the ladder; a
speculative variant that serves another model (the tiny pair of seed 1) fails it, is not eligible, and the run
exits 3 (or 5 when the busy machine left no step clean, with the quality failure still among the reasons)."""

import json

import pytest

from locust_llm.analysis.gates import EXIT_INVALID, EXIT_SLO
from tests.helpers import REPO, require_llama_server, run_locust

SCENARIO = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text().replace(
    """  spec-k4:
    speculative: {type: draft-simple, n_max: 4, p_min: 0.0}
""",
    """  spec-k4:
    speculative: {type: draft-simple, n_max: 4, p_min: 0.0}
  spec-broken:
    tiny_model: {preset: test, seed: 1}
    speculative: {type: draft-simple, n_max: 4, p_min: 0.0}
""",
) + "quality: {temperature: 0.3, seeds: 3, max_drop_pct: 5}\n"


@pytest.mark.server
def test_a_variant_that_changes_the_output_fails_the_quality_gate(tmp_path):
    require_llama_server()
    assert "spec-broken" in SCENARIO
    scenario = tmp_path / "quality.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(
        tmp_path, "--scenario", str(scenario), "--ladder", "1", "--step-duration", "3", "--warmup", "1", "--run-id", "q"
    )
    run = tmp_path / "q"
    verdict = json.loads((run / "verdict.json").read_text())
    assert done.returncode == verdict["exit_code"] and done.returncode in (EXIT_SLO, EXIT_INVALID), done.stderr[-3000:]
    assert any(r.startswith("spec-broken: quality gate failed: greedy") for r in verdict["reasons"][str(EXIT_SLO)])
    answers = json.loads((run / "quality.json").read_text())
    assert answers["seeds"] == [0, 1, 2] and len(answers["items"]) == 16
    for name in ("baseline", "spec-k4", "spec-broken"):
        assert len(answers["variants"][name]["greedy"]) == 16 and len(answers["variants"][name]["sampled"]) == 48
    quality = json.loads((run / "summary.json").read_text())["quality"]
    base, spec, broken = (quality["variants"][n] for n in ("baseline", "spec-k4", "spec-broken"))
    assert base["eligible"] and base["greedy"]["passed"] >= 12  # its own answers to the 12 @baseline tasks
    # Lossless speculation: every greedy answer identical token for token, and no change in either pass rate.
    assert spec["eligible"] and spec["agreement"]["identical"] == spec["agreement"]["compared"] == 16
    assert spec["greedy"]["difference"] == 0.0
    low, high = spec["sampled"]["difference_ci95"]
    assert low <= 0.0 <= high
    # Another model: none of the baseline's greedy answers, a drop whose whole interval lies beyond 5 points.
    assert not broken["eligible"] and broken["greedy"]["beyond_limit"] and broken["greedy"]["difference"] <= -0.5
    assert broken["agreement"]["identical"] < 16 and broken["failing_total"] > 0
    comparisons = {c["variant"]: c for c in json.loads((run / "summary.json").read_text())["comparisons"]}
    assert comparisons["spec-broken"]["recommendation"].startswith("do not enable spec-broken")
    assert not comparisons["spec-k4"]["recommendation"].startswith("do not enable")
    html = (run / "report.html").read_text()
    assert '<section id="quality">' in html and "NOT ELIGIBLE: quality gate failed" in html
    assert "quality of spec-broken:" in done.stderr
    # One greedy check per variant: the 4 consistency prompts and the 16 tasks, the baseline asked the prompts twice.
    consistency = json.loads((run / "consistency.json").read_text())
    # llama.cpp alone repeats itself
    assert all(a["repeat"]["text"] == a["text"] and a["text"] for a in consistency["baseline"])
    assert all("repeat" not in a for a in consistency["spec-k4"])
    greedy = json.loads((run / "summary.json").read_text())["greedy"]
    assert (greedy["spec-k4"]["compared"], greedy["spec-k4"]["identical"], greedy["spec-k4"]["cause"]) == (20, 20, None)
    broken_check = greedy["spec-broken"]
    assert broken_check["baseline_repeat"] == "identical" and broken_check["cause"] == "speculative decoding"
    assert len(broken_check["diverged"]) == broken_check["compared"] - broken_check["identical"] > 0
    first = broken_check["diverged"][0]
    assert f"greedy check of spec-broken: {broken_check['identical']}/20 greedy answers identical" in done.stderr
    assert f"DIVERGED on {first['source']} {first['prompt_id']} from token {first['first_divergence']}" in done.stderr
