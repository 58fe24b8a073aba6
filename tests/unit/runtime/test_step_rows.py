"""The rows the runtime writes to ``steps.json`` fit their model (``rundir.steps.StepRow``): a ladder, a scale-out
and a soak, in memory and on disk, field for field."""

import json

import pytest

from locust_llm.rundir.steps import StepRow
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime import soak as soak_module

from .fakes import Clock
from .test_experiment import run_program
from .test_soak import scenario_file


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    monkeypatch.setattr(soak_module, "now", clock)
    return clock


def assert_rows_fit(experiment) -> None:
    on_disk = json.loads((experiment.run.path / "steps.json").read_text())["steps"]
    assert on_disk and len(on_disk) == len(experiment.run.steps)
    for row, written in zip(experiment.run.steps, on_disk, strict=True):
        assert json.dumps(StepRow.model_validate(row).model_dump(exclude_unset=True)) == json.dumps(row)
        assert StepRow.model_validate(written).model_dump(exclude_unset=True) == written


def test_ladder_and_scale_out_rows_fit(tmp_path, clock):
    experiment, *_ = run_program(tmp_path, ladder="1,3", step_duration=2, warmup=1, scale_out=2)
    assert any("servers" in row for row in experiment.run.steps)
    assert_rows_fit(experiment)


def test_soak_rows_fit(tmp_path, clock):
    scenario = scenario_file(tmp_path, "soak: {window_s: 2}\n")
    experiment, *_ = run_program(tmp_path, scenario=scenario, soak="6s", warmup=1, ladder="1,3")
    assert [row["window"] for row in experiment.run.steps] == [0, 1, 2]
    assert_rows_fit(experiment)
