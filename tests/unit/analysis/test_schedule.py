"""Draft-length sweeps: the best k per level and the schedule, on synthetic runs whose answer is set by
construction, and the choice rules on hand-made candidates."""

import json
import sys

import numpy as np
import pytest

from locust_llm.analysis.schedule import OFF, UNJUDGED, choose, schedule, schedule_text, vllm_schedule
from locust_llm.analysis.summary import build_summary
from locust_llm.pipeline import finish_run
from locust_llm.rundir import load_run
from locust_llm.scenario import ScenarioError, load_scenario
from locust_llm.servers import plan_variant
from tests.synthetic import back_to_back, patch_env, window, write_run

TOKENS = 40
TTFT_S = 0.020
WINDOW_S = 20.0
# Per-token seconds of each variant at each level. Per stream a request takes TTFT + 39 x TPOT, so the speed-up
# over the baseline is (20 + 39 b) / (20 + 39 v): at 1, k4 2.3x > k2 1.6x > k1 1.2x; at 2 k4 leads; at 4, k2
# (1.31x) beats k4 (1.19x) and k1 (1.09x); at 8 every k is 12-20% slower: off.
TPOT_MS = {
    "baseline": {1: 10, 2: 10, 4: 12, 8: 16},
    "spec-k1": {1: 8, 2: 8.5, 4: 11, 8: 19},
    "spec-k2": {1: 6, 2: 6.5, 4: 9, 8: 18},
    "spec-k4": {1: 4, 2: 5, 4: 10, 8: 20},
}
SWEEP = {"spec": {"setting": "n_max", "label": "k", "values": [1, 2, 4], "variants": ["spec-k1", "spec-k2", "spec-k4"]}}


def sweep_run(path, rng, tpot_ms=TPOT_MS):
    """Each variant over the ladder, `level` closed-loop streams back to back, jittered per-token gaps."""
    rows, steps, t = [], [], 1_800_000_000.0
    for variant, per_level in tpot_ms.items():
        for step, level in enumerate(sorted(per_level)):
            steps.append(window(variant, step, level, t, WINDOW_S))
            for stream in range(level):
                rows += back_to_back(
                    path.name, variant, level, step, t, WINDOW_S, TTFT_S, per_level[level] / 1000, TOKENS, rng, stream
                )
            t += WINDOW_S + 5.0
    write_run(path, rows, steps)
    return patch_env(path, "scenario", sweeps=SWEEP)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    run = sweep_run(tmp_path_factory.mktemp("sweep"), np.random.default_rng(3))
    return build_summary(load_run(run)).model_dump(mode="json")


def test_the_best_k_per_level_is_the_one_built_in(swept):
    (sched,) = swept["schedules"]
    assert [(row["level"], row["choice"]) for row in sched["levels"]] == [(1, 4), (2, 4), (4, 2), (8, OFF)]
    assert sched["levels"][3]["all_slower"] is True
    at_one = {c["value"]: c["speedup"]["value"] for c in sched["levels"][0]["candidates"]}
    truth = {k: (20 + 39 * 10) / (20 + 39 * TPOT_MS[f"spec-k{k}"][1]) for k in (1, 2, 4)}
    assert at_one == pytest.approx(truth, rel=0.03)


def test_the_schedule_reads_as_ranges_and_in_vllms_shape(swept):
    (sched,) = swept["schedules"]
    assert sched["text"] == "concurrency <= 2: k = 4; 4: k = 2; >= 8: off"
    assert sched["vllm"]["num_speculative_tokens_per_batch_size"] == [[1, 2, 4], [3, 4, 2], [5, 8, 0]]
    assert sched["vllm"]["num_speculative_tokens"] == 4
    assert "above 8 were not measured" in sched["vllm"]["note"]


def test_a_sweep_that_always_wins_has_one_range(tmp_path):
    tpot = {"baseline": {1: 10, 2: 12}, "spec-k1": {1: 8, 2: 9}, "spec-k2": {1: 6, 2: 7}, "spec-k4": {1: 7, 2: 8}}
    summary = build_summary(load_run(sweep_run(tmp_path, np.random.default_rng(4), tpot))).model_dump(mode="json")
    (sched,) = summary["schedules"]
    assert sched["text"] == "every level measured (1-2): k = 2"


def ratio(value, lo, hi):
    return {"value": value, "ci95": [lo, hi]}


def test_choose_needs_an_interval_above_one_and_notes_ties():
    picked = choose(
        [
            {"value": 2, "status": "clean", "speedup": ratio(1.30, 1.20, 1.40)},
            {"value": 4, "status": "clean", "speedup": ratio(1.35, 1.25, 1.45)},
            {"value": 8, "status": "clean", "speedup": ratio(1.50, 0.90, 2.10)},
        ]
    )  # wide: not clearly
    assert picked["choice"] == 4 and "within noise of 2" in picked["why"]
    unclear = choose([{"value": 2, "status": "clean", "speedup": ratio(1.05, 0.95, 1.15)}])
    assert unclear["choice"] == OFF and not unclear["all_slower"]
    # An inconclusive level (blocks disagree) never picks a k, and a contended one is not judged at all.
    assert choose([{"value": 2, "status": "inconclusive", "speedup": ratio(1.5, 1.3, 1.7)}])["choice"] == OFF
    assert choose([{"value": 2, "status": "contended", "speedup": {"value": None}}])["choice"] == UNJUDGED


def test_the_choice_is_the_highest_speedup_not_the_highest_k():
    # The CPU sweep's 4-stream level: both clearly faster, k = 4 has the higher speed-up and is chosen; k = 8's
    # interval reaches k = 4's lower bound, so it is named as within noise.
    picked = choose(
        [
            {"value": 4, "status": "clean", "speedup": ratio(1.97, 1.81, 2.14)},
            {"value": 8, "status": "clean", "speedup": ratio(1.83, 1.52, 2.20)},
        ]
    )
    assert picked["choice"] == 4 and picked["why"] == "highest speed-up among 2 clearly faster; within noise of 8"


def test_schedule_ranges_and_text():
    ranges = schedule([(8, OFF), (1, 6), (2, 6), (4, 2), (16, OFF)])
    assert ranges == [
        {"low": 1, "high": 2, "choice": 6},
        {"low": 4, "high": 4, "choice": 2},
        {"low": 8, "high": 16, "choice": OFF},
    ]
    assert schedule_text(ranges, "k") == "concurrency <= 2: k = 6; 4: k = 2; >= 8: off"
    # A level not judged splits the schedule and has no vLLM form.
    gap = schedule([(1, 4), (2, UNJUDGED), (4, 4)])
    assert len(gap) == 3 and vllm_schedule(gap) is None
    assert vllm_schedule(schedule([(1, "draft-a"), (2, OFF)])) is None  # draft models are not a length
    # Levels not judged at the top are left out: the setting covers what was measured cleanly.
    top = vllm_schedule(schedule([(1, 8), (2, 8), (4, 4), (8, UNJUDGED)]))
    assert top["num_speculative_tokens_per_batch_size"] == [[1, 2, 8], [3, 4, 4]] and "above 4" in top["note"]


def test_a_list_of_draft_lengths_expands_into_named_variants(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nserver: {engine: llamacpp, tiny_model: {}}\nvariants:\n  baseline: {}\n"
        "  spec: {speculative: {type: draft-simple, n_max: [1, 2, 4, 8], p_min: 0.0}}\n"
    )
    scenario = load_scenario(path)
    assert list(scenario.variants) == ["baseline", "spec-k1", "spec-k2", "spec-k4", "spec-k8"]
    assert scenario.speculative("spec-k8").n_max == 8 and scenario.speculative("spec-k8").p_min == 0.0
    assert scenario.sweeps["spec"].variants == ["spec-k1", "spec-k2", "spec-k4", "spec-k8"]

    path.write_text(
        "name: s\nserver: {engine: llamacpp, tiny_model: {}}\nvariants:\n  baseline: {}\n"
        "  spec: {speculative: {n_max: [1, 2], n_min: [0, 1]}}\n"
    )
    with pytest.raises(ScenarioError, match=r"variants\.spec\.speculative: lists for n_max and n_min"):
        load_scenario(path)
    path.write_text(
        "name: s\nserver: {engine: llamacpp, tiny_model: {}}\nvariants:\n  baseline: {}\n"
        "  spec: {speculative: {n_max: [2, 2]}}\n"
    )
    with pytest.raises(ScenarioError, match="distinct values"):
        load_scenario(path)


def test_a_list_of_draft_models_expands_into_variants_named_after_the_files(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nserver: {engine: llamacpp, tiny_model: {}}\nvariants:\n  baseline: {}\n"
        "  spec: {speculative: {type: draft-simple, n_max: 4,\n"
        '         draft_model: [/models/draft-a.gguf, "/models/draft b.Q4.gguf"]}}\n'
    )
    scenario = load_scenario(path)
    assert list(scenario.variants) == ["baseline", "spec-draft-a", "spec-draft-b.Q4"]
    sweep = scenario.sweeps["spec"]
    assert (sweep.setting, sweep.label) == ("draft_model", "draft_model")
    assert sweep.values == ["/models/draft-a.gguf", "/models/draft b.Q4.gguf"]
    assert scenario.speculative("spec-draft-b.Q4").draft_model == "/models/draft b.Q4.gguf"
    assert scenario.speculative("spec-draft-b.Q4").n_max == 4  # the other settings carried over


def test_vllm_and_sglang_draft_lengths_expand_down_to_the_command_line(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text(
        f"name: v\nserver: {{engine: vllm, model: m/target, binary: {json.dumps(sys.executable)}}}\n"
        "variants:\n  baseline: {}\n"
        "  spec: {speculative: {method: eagle3, model: m/eagle3, num_speculative_tokens: [1, 3, 5]}}\n"
    )
    scenario = load_scenario(path)
    assert scenario.sweeps["spec"].variants == ["spec-k1", "spec-k3", "spec-k5"]
    assert scenario.sweeps["spec"].label == "k"
    argv = plan_variant(scenario, "spec-k3", port=8123).argv
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "m/eagle3", "num_speculative_tokens": 3}

    path = tmp_path / "g.yaml"
    path.write_text(
        f"name: g\nserver: {{engine: sglang, model: m/target, binary: {json.dumps(sys.executable)}}}\n"
        "variants:\n  baseline: {}\n  eagle: {speculative: {algorithm: EAGLE, draft_model_path: m/draft,"
        " num_steps: 3, eagle_topk: 1, num_draft_tokens: [2, 4]}}\n"
    )
    scenario = load_scenario(path)
    assert scenario.sweeps["eagle"].variants == ["eagle-k2", "eagle-k4"]
    pairs = dict(zip(argv := plan_variant(scenario, "eagle-k4", port=30000).argv, argv[1:], strict=False))
    assert (
        pairs["--speculative-num-steps"],
        pairs["--speculative-eagle-topk"],
        pairs["--speculative-num-draft-tokens"],
    ) == ("3", "1", "4")


def test_the_report_says_where_the_sweep_stopped_climbing(tmp_path):
    run = sweep_run(tmp_path, np.random.default_rng(3))
    steps = json.loads((run / "steps.json").read_text())
    # What the runner notes when every k was clearly slower at level 8 (live speed-ups in value order).
    steps["events"] = [
        {
            "kind": "sweep_stopped",
            "t": 0.0,
            "sweep": "spec",
            "level": 8,
            "context": None,
            "speedups": [0.84, 0.88, 0.81],
        }
    ]
    (run / "steps.json").write_text(json.dumps(steps))
    finish_run(run)
    (sched,) = json.loads((run / "summary.json").read_text())["schedules"]
    (stop,) = sched["stopped"]
    assert (stop["level"], stop["context"], stop["speedups"]) == (8, None, [0.84, 0.88, 0.81])
    assert stop["text"] == (
        "stopped after level 8: every setting was clearly slower than the baseline there (95% "
        "interval of the live output tok/s ratio below 1; k = 1: 0.84x, k = 2: 0.88x, "
        "k = 4: 0.81x), so higher levels were not measured"
    )
    assert "<b>Stopped early</b>: stopped after level 8" in (run / "report.html").read_text()


def test_the_report_shows_the_sweep_and_writes_the_schedule_file(tmp_path):
    finish_run(sweep_run(tmp_path, np.random.default_rng(3)))
    html = (tmp_path / "report.html").read_text()
    assert "Draft-length sweep" in html and "concurrency &lt;= 2: k = 4; 4: k = 2; &gt;= 8: off" in html
    assert "aggregate output tok/s speed-up over the baseline per n_max" in html
    assert (
        "the highest point speed-up among the settings measured cleanly and clearly faster, i.e. a 95% CI "
        "wholly above 1" in html
    )
    assert "Stopped early" not in html  # no sweep_stopped event in this run
    (saved,) = json.loads((tmp_path / "schedule.json").read_text())
    assert saved["setting"] == "n_max" and saved["ranges"][-1] == {"low": 8.0, "high": 8.0, "choice": "off"}
    assert saved["vllm"]["num_speculative_tokens_per_batch_size"] == [[1, 2, 4], [3, 4, 2], [5, 8, 0]]


def test_an_open_loop_sweep_chooses_by_latency_not_by_the_offered_rate(tmp_path):
    """Open loop at one rate: both settings deliver the offered tok/s (a ratio near 1 with a tight interval), but
    k = 2 halves the TPOT and k = 1 changes nothing. The choice is k = 2, shown with its E2E_sched P95 speed-up."""
    from tests.synthetic import open_loop_run

    run = open_loop_run(tmp_path, tpot_s={"baseline": 0.020, "spec-k1": 0.020, "spec-k2": 0.010})
    patch_env(
        run,
        "scenario",
        sweeps={"spec": {"setting": "n_max", "label": "k", "values": [1, 2], "variants": ["spec-k1", "spec-k2"]}},
    )
    summary = finish_run(run).summary
    (sched,) = summary.schedules
    (level,) = sched.levels
    assert level.choice == 2
    by_value = {c.value: c for c in level.candidates}
    assert by_value[2].state == "better" and by_value[1].state != "better"
    e2e_truth = (0.030 + 19 * 0.020) / (0.030 + 19 * 0.010)  # E2E P95 ratio: the same TTFT, half the TPOT
    assert by_value[2].speedup.value == pytest.approx(e2e_truth, rel=0.1)
    comparison = {c.variant: c for c in summary.comparisons}["spec-k2"]
    assert comparison.steps[0].output_tps_speedup.value == pytest.approx(1.0, abs=0.05)  # the rate fixes tok/s
