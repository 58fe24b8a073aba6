"""The runtime builds ``steps.json``'s rows as ``rundir.steps.StepRow`` and writes the same file, byte for byte, as
the release before the model (7db6fe5) wrote for the same program on the same fake clock: a ladder with its
scale-out, and a soak."""

import pytest

from locust_llm.rundir.steps import StepRow
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime import soak as soak_module
from tests.helpers import REPO

from .fakes import Clock
from .test_experiment import run_program
from .test_soak import scenario_file

PREVIOUS = REPO / "tests" / "data" / "steps-7db6fe5"


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    monkeypatch.setattr(soak_module, "now", clock)
    return clock


def test_ladder_and_scale_out_rows_are_written_as_before(tmp_path, clock):
    # The program of tests/unit/runtime/test_scale_out.py::test_after_each_ladder_one_server_against_two_in_abba_pairs
    experiment, *_ = run_program(tmp_path, ladder="1,3", step_duration=2, warmup=1, scale_out=2)
    assert all(isinstance(row, StepRow) for row in experiment.run.steps)
    assert any(row.servers for row in experiment.run.steps)
    written = (experiment.run.path / "steps.json").read_text()
    assert written == (PREVIOUS / "scale-out.json").read_text()


def test_soak_rows_are_written_as_before(tmp_path, clock):
    # The program of tests/unit/runtime/test_soak.py::test_the_soak_holds_its_level_in_consecutive_windows_...
    scenario = scenario_file(tmp_path, "soak: {window_s: 2}\n")
    experiment, *_ = run_program(tmp_path, scenario=scenario, soak="6s", warmup=1, ladder="1,3")
    assert [row.window for row in experiment.run.steps] == [0, 1, 2]
    written = (experiment.run.path / "steps.json").read_text()
    assert written == (PREVIOUS / "soak.json").read_text()
