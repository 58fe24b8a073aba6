"""The plugin sets the process's exit code from the verdict, unless the load test itself crashed: then Locust's
own code (from its exceptions) stands, so a crash is never reported as a verdict's 0 or 3."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from locust import log as locust_log

from locust_llm.runtime import plugin


class FinishedExperiment:
    """What ``on_quitting`` needs of a run: its finish, and a verdict with ``code``."""

    def __init__(self, code: int):
        self.outcome = SimpleNamespace(text="verdict table", verdict=SimpleNamespace(exit_code=code))
        self.finished_final = False

    def finish(self, final: bool) -> Path:
        self.finished_final = final
        return Path("reports/unit")


def quit_run(
    monkeypatch,
    verdict: int,
    exceptions: dict | None = None,
    greenlet_crashed: bool = False,
    code_before: int | None = None,
) -> tuple[int | None, FinishedExperiment]:
    monkeypatch.setattr(locust_log, "unhandled_greenlet_exception", greenlet_crashed)
    environment = SimpleNamespace(runner=SimpleNamespace(exceptions=exceptions or {}), process_exit_code=code_before)
    experiment = plugin.state_of(environment).experiment = FinishedExperiment(verdict)
    plugin.on_quitting(environment)
    return environment.process_exit_code, experiment


@pytest.mark.parametrize("verdict", [0, 3, 5])
def test_the_verdict_is_the_exit_code_of_a_run_that_did_not_crash(monkeypatch, verdict):
    code, experiment = quit_run(monkeypatch, verdict)
    assert code == verdict and experiment.finished_final


@pytest.mark.parametrize("verdict", [0, 3])
@pytest.mark.parametrize(
    "crash", [{"exceptions": {"k": {"count": 1, "msg": "ZeroDivisionError"}}}, {"greenlet_crashed": True}]
)
def test_a_crash_keeps_locusts_own_exit_code(monkeypatch, verdict, crash, caplog):
    # Left unset, Locust's main turns its exceptions into its own non-zero code.
    code, experiment = quit_run(monkeypatch, verdict, **crash)
    assert code is None and experiment.finished_final  # the run is still written and reported
    assert "Locust's exit code stands" in caplog.text


def test_a_code_set_before_the_end_is_kept(monkeypatch):
    # e.g. bad input found at the start (exit 2): the verdict of what little ran does not replace it
    code, _ = quit_run(monkeypatch, 0, code_before=2)
    assert code == 2
