"""Faults and probes on the master, against reference servers launched as real processes (``ServerProcess``): a
pause that requests in flight wait out, a restart the workers are told about, and a crash that fails the run."""

import math
import sys
from pathlib import Path

import gevent
import pytest
import yaml

from locust_llm.client.http import session
from locust_llm.pipeline import finish_run
from locust_llm.records import now
from locust_llm.rundir import RunDir, layout
from locust_llm.rundir.env import RunEnv, ServerEnv
from locust_llm.rundir.events import ProbeServerFailed, ServerPaused, ServerRestarted
from locust_llm.rundir.steps import StepRow
from locust_llm.runtime.plan import load_plan
from locust_llm.runtime.probes import Faults
from locust_llm.runtime.session import ActiveServer
from locust_llm.runtime.steps import StepState
from locust_llm.servers.base import LaunchPlan, ServerError, ServerProcess, free_port
from tests.helpers import REPO

from .fakes import options

PAUSE_S = 1.0


class RefSession:
    """The part of ``ServerSession`` faults use, with reference servers as the launched servers."""

    def __init__(self, run: RunDir, *args: str):
        self.run, self.args = run, list(args)
        self.server: ActiveServer | None = None
        self.servers: dict[str, ActiveServer] = {}

    def start(self, variant: str, port: int | None = None) -> ActiveServer:
        port = port or free_port()
        argv = [sys.executable, "-m", "locust_llm.refserver", "--port", str(port), *self.args]
        plan = LaunchPlan(
            engine="refserver", variant=variant, argv=argv, env={"PYTHONPATH": str(REPO)}, host="127.0.0.1", port=port
        )
        process = ServerProcess(
            plan, self.run.file(layout.server_log(variant)), startup_timeout_s=30, stop_grace_s=5
        ).start()
        self.servers[variant] = ActiveServer(variant, process.base_url, "refserver-model", process)
        self.run.env.servers[variant] = ServerEnv(url=process.base_url, context_size=None)
        return self.activate(variant)

    def activate(self, variant: str) -> ActiveServer:
        self.server = self.servers[variant]
        return self.server

    def stop(self, variant: str | None = None) -> None:
        server = self.servers.pop(variant or self.server.variant, None)
        if server is self.server:
            self.server = None
        if server is not None:
            server.process.stop()

    def stop_all(self) -> None:
        for variant in list(self.servers):
            self.stop(variant)


class Experiment:
    """What ``Faults`` asks of the experiment: its plan, run directory, session, step state and broadcasts."""

    def __init__(self, tmp_path: Path, probes: dict, *server_args: str):
        scenario = yaml.safe_load((REPO / "scenarios" / "tiny-cpu-test.yaml").read_text())
        path = tmp_path / "scenario.yaml"
        path.write_text(yaml.safe_dump({**scenario, "probes": probes}))
        self.plan = load_plan(options(scenario=str(path), report_dir=str(tmp_path), run_id="unit", variant="baseline"))
        self.run = RunDir(self.plan.report_dir, self.plan.run_id)
        self.run.env = RunEnv(run_id="unit", servers={}, scenario=self.plan.scenario.model_dump(mode="json"))
        self.run.write_env()
        self.session = RefSession(self.run, *server_args)
        self.state = StepState(run_id="unit", variant="baseline", step=1, level=2.0, phase="steady")
        self.classes, self.interrupted = ["closed-user"], False
        self.broadcasts: list[str] = []
        self.warnings: list[str] = []

    def broadcast(self, variant, step, level, phase, t_start=math.nan, context=0) -> None:
        server = self.session.server
        self.broadcasts.append(server.base_url if server else "")

    def warn(self, kind: str, text: str) -> None:
        self.warnings.append(text)

    def send_state(self) -> None:
        pass

    def idle_tick(self) -> tuple:
        return (0, 100, self.classes)


def steady_row(level: float = 2.0) -> StepRow:
    # The middle of the window is long past: the next tick injects the fault.
    return StepRow(
        variant="baseline",
        step=1,
        level=level,
        mode="closed",
        context=None,
        t_start=now() - 61,
        t_steady=now() - 60,
        t_end=math.nan,
    )


def completion_s(url: str) -> float:
    t0 = now()
    with session("test") as http:
        answer = http.post(f"{url}/v1/completions", json={"prompt": "a b", "max_tokens": 2, "stream": True}, timeout=30)
        assert answer.status_code == 200 and b"[DONE]" in answer.content
    return now() - t0


@pytest.fixture
def experiment(tmp_path, request):
    probes, *args = request.param
    exp = Experiment(tmp_path, probes, *args)
    exp.session.start("baseline")
    yield exp
    exp.session.stop_all()


@pytest.mark.parametrize("experiment", [({"faults": ["pause"], "pause_s": PAUSE_S},)], indirect=True)
def test_a_pause_holds_requests_until_sigcont_and_is_recorded(experiment):
    faults = Faults(experiment)
    url = experiment.session.server.base_url
    row = steady_row()
    faults.tick(steady_row(level=1.0))  # another level: nothing happens
    assert not faults.results
    waited = gevent.spawn_later(0.3, completion_s, url)  # sent while the server is stopped
    faults.tick(row)
    assert waited.get(timeout=30) >= PAUSE_S - 0.3 - 0.05
    paused = [e for e in experiment.run.events if isinstance(e, ServerPaused)]
    assert len(paused) == 1 and paused[0].t_end - paused[0].t_start == pytest.approx(PAUSE_S, abs=0.2)
    assert row.model_dump(exclude_unset=True)["faults"] == [
        {"kind": "pause", "t_start": paused[0].t_start, "t_end": paused[0].t_end, "pause_s": PAUSE_S}
    ]
    result = faults.results[0]
    assert (result.probe, result.kind, result.verdict, result.step, result.recovered) == (
        "pause",
        "fault",
        "ok",
        1,
        True,
    )
    assert completion_s(url) < 1.0  # running again
    faults.tick(steady_row())  # one fault per step, each fault once
    assert len(faults.results) == 1
    assert layout.read_json(experiment.run.file(layout.PROBES))["probes"][0]["probe"] == "pause"


@pytest.mark.parametrize("experiment", [({"faults": ["restart"]},)], indirect=True)
def test_a_restart_brings_the_variant_back_and_tells_the_workers(experiment):
    faults = Faults(experiment)
    old = experiment.session.server
    faults.tick(steady_row())
    new = experiment.session.server
    assert new is not old and not old.process.alive() and new.process.alive()
    assert experiment.broadcasts == ["", new.base_url]  # the users waited while there was no server
    restarted = [e for e in experiment.run.events if isinstance(e, ServerRestarted)]
    assert len(restarted) == 1 and restarted[0].new_url == new.base_url
    assert restarted[0].same_port == (new.base_url == old.base_url)
    result = faults.results[0]
    assert result.verdict == "ok" and result.recover_ms >= result.latency_ms > 0
    assert completion_s(new.base_url) < 1.0


@pytest.mark.parametrize("experiment", [({"faults": ["restart"]},)], indirect=True)
def test_a_server_that_does_not_come_back_ends_the_run_with_exit_6(experiment, monkeypatch):
    def refuse(variant, port=None):
        raise ServerError("exited with code 1 during start-up")

    faults = Faults(experiment)
    monkeypatch.setattr(experiment.session, "start", refuse)
    faults.tick(steady_row())
    assert experiment.interrupted and faults.results[0].verdict == "server-failed"
    assert [e.kind for e in experiment.run.events] == ["server_restart_failed"]
    outcome = finish_run(experiment.run.path)
    assert outcome.verdict.exit_code == 6 and "server_restart_failed: variant baseline" in outcome.verdict.reasons["6"]


@pytest.mark.parametrize("experiment", [({"enabled": True, "recover_s": 5}, "--exit-on", "\\u0000")], indirect=True)
def test_a_server_that_crashes_on_a_probe_fails_the_run_with_exit_6(experiment):
    faults = Faults(experiment)
    ticks = list(faults.probe("baseline"))
    assert len(ticks) == len(faults.results) == 11
    crashed = next(r for r in faults.results if r.verdict == "server-failed")
    assert crashed.probe == "control_characters" and crashed.note == "the server process exited"
    events = [e for e in experiment.run.events if isinstance(e, ProbeServerFailed)]
    assert len(events) == 1 and events[0].probe == "control_characters"
    outcome = finish_run(experiment.run.path)
    assert outcome.verdict.exit_code == 6
    assert any(
        "probe_server_failed: variant baseline at probe control_characters" in r for r in outcome.verdict.reasons["6"]
    )
    assert outcome.summary.probes.failed == ["baseline"]
    html = (experiment.run.path / layout.REPORT).read_text()
    assert 'id="probes"' in html and "server-failed" in html


@pytest.mark.parametrize("experiment", [({"enabled": True}, "--ttft-s", "30")], indirect=True)
def test_sigterm_abandons_the_probe_in_flight_at_once(experiment):
    """A probe may take minutes; after SIGTERM a job runner leaves seconds before its SIGKILL."""
    faults = Faults(experiment)
    gevent.spawn_later(0.5, setattr, experiment, "interrupted", True)
    started = now()
    assert list(faults.probe("baseline")) == [] and not faults.results
    assert now() - started < 2.0
