"""``--soak``: the options and scenario section it reads, and the program that holds one level in windows (fake
runner, clock and server)."""

import json
import math

import pandas as pd
import pytest

from locust_llm.records import Phase
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime import soak as soak_module
from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError
from locust_llm.scenario.soak import SoakSpec, parse_duration, soak_plan
from tests.helpers import REPO

from .fakes import Clock, options
from .test_experiment import run_program

SCENARIO = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()


@pytest.mark.parametrize(
    "text, seconds", [("90s", 90), ("10m", 600), ("2h", 7200), ("1.5h", 5400), ("45", 45), (" 3 m ", 180)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["2 hours", "0s", "-1m", "200h", "h", "1e3s", "nan"])
def test_bad_durations_name_the_option_and_the_forms(text):
    with pytest.raises(ValueError, match=r"--soak must be a duration such as 90s, 10m or 2h"):
        parse_duration(text)


def test_the_duration_is_split_into_equal_windows_and_at_least_three():
    spec = SoakSpec(window_s=120)
    assert soak_plan("", 0, spec, [1, 2], ["baseline"], "") is None
    plan = soak_plan("10m", 0, spec, [1, 4, 2], ["baseline"], "")
    assert (plan.windows, plan.window_s, plan.level, plan.variant) == (5, 120.0, 4.0, "baseline")
    plan = soak_plan("100s", 3, SoakSpec(window_s=30), [1], ["spec"], "spec")
    assert (plan.windows, plan.window_s, plan.level) == (3, 100 / 3, 3.0)
    assert soak_plan("60s", 0, spec, [8], ["b"], "").windows == 3  # a trend needs three points
    with pytest.raises(ValueError, match="one variant"):
        soak_plan("1h", 0, spec, [1], ["a", "b"], "a,b")


def scenario_file(tmp_path, soak: str = "") -> str:
    path = tmp_path / "soak.yaml"
    path.write_text(SCENARIO + soak)
    return str(path)


def test_the_plan_holds_one_variant_and_reads_the_scenarios_soak_section(tmp_path):
    given = {"report_dir": str(tmp_path), "run_id": "s"}
    scenario = scenario_file(tmp_path, "soak: {window_s: 30, max_drift_pct_per_hour: 5, max_error_rate: null}\n")
    plan = load_plan(options(scenario=scenario, soak="2m", **given))
    assert plan.variants == ["baseline"] and plan.soak.level == 2.0
    assert (plan.soak.windows, plan.soak.max_drift_pct_per_hour, plan.soak.max_error_rate) == (4, 5.0, None)
    assert plan.soak.max_memory_growth_mib_per_hour == 100.0  # the default
    plan = load_plan(options(scenario=scenario, soak="2m", soak_level=1.0, variant="spec-k4", **given))
    assert plan.variants == ["spec-k4"] and plan.soak.level == 1.0
    assert load_plan(options(scenario=scenario, **given)).soak is None
    with pytest.raises(ScenarioError, match="--soak holds one variant"):
        load_plan(options(scenario=scenario, soak="2m", variant="baseline,spec-k4", **given))
    with pytest.raises(ScenarioError, match="--soak must be a duration"):
        load_plan(options(scenario=scenario, soak="forever", **given))


def test_a_bad_soak_section_names_the_key(tmp_path):
    with pytest.raises(ScenarioError, match=r"soak\.window_s"):
        load_plan(options(scenario=scenario_file(tmp_path, "soak: {window_s: -1}\n"), soak="1m"))
    with pytest.raises(ScenarioError, match="did you mean 'max_error_rate'"):
        load_plan(options(scenario=scenario_file(tmp_path, "soak: {max_error: 0.1}\n"), soak="1m"))


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    monkeypatch.setattr(soak_module, "now", clock)
    return clock


def test_the_soak_holds_its_level_in_consecutive_windows_and_writes_them_as_it_goes(tmp_path, clock, monkeypatch):
    scenario = scenario_file(tmp_path, "soak: {window_s: 2}\n")
    on_disk = []

    def checkpoint(exp):  # what a SIGKILL right after each window would leave
        written(exp)
        run = exp.run.path
        on_disk.append(
            (
                json.loads((run / "steps.json").read_text())["steps"],
                (run / "host.parquet").exists(),
                (run / "client.parquet").exists(),
                exp.session.telemetry.flushes,
            )
        )

    written = experiment_module.Experiment.checkpoint
    monkeypatch.setattr(experiment_module.Experiment, "checkpoint", checkpoint)
    experiment, ticks, phases, env = run_program(tmp_path, scenario=scenario, soak="6s", warmup=1, ladder="1,3")
    rows = experiment.run.steps
    assert [(r.window, r.step, r.level, r.users) for r in rows] == [
        (0, 0, 3, 3),
        (1, 1, 3, 3),
        (2, 2, 3, 3),
    ]
    first = rows[0].t_steady
    assert 1.0 <= first - rows[0].t_start <= 1.0 + 2 * clock.step  # the warm-up, before the first window only
    for i, row in enumerate(rows):
        # the windows' ends lie on a grid from the first window's start: no drift over a long soak
        assert 2.0 * (i + 1) <= row.t_end - first <= 2.0 * (i + 1) + 2 * clock.step
        if i:
            assert row.t_start == row.t_steady == rows[i - 1].t_end  # no gap between windows
    assert experiment.session.started == ["baseline"]
    measured = {(s, p) for v, s, p in phases if p in (Phase.WARMUP, Phase.STEADY)}
    assert measured == {(0, Phase.WARMUP), (0, Phase.STEADY), (1, Phase.STEADY), (2, Phase.STEADY)}
    assert all(t == (3, 3, ["closed-user"]) for (v, s, p), t in zip(phases, ticks, strict=False) if p == Phase.STEADY)
    # each window's end was on disk when the next began, with the host and client samples and the telemetry flushed
    assert [len(steps) for steps, *_ in on_disk] == [1, 2, 3]
    assert all(math.isfinite(steps[-1]["t_end"]) and host and client for steps, host, client, _ in on_disk)
    assert [flushes for *_, flushes in on_disk] == [1, 2, 3]
    env_doc = json.loads((experiment.run.path / "env.json").read_text())
    assert env_doc["soak"]["windows"] == 3 and env_doc["soak"]["variant"] == "baseline"
    assert env_doc["variants"] == ["baseline"]
    assert len(pd.read_parquet(experiment.run.path / "client.parquet").columns) == 5
    progress = experiment.progress()
    assert progress["steps"] == 3 and progress["run_left_s"] == 0.0
