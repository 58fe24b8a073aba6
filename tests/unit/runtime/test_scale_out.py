"""``--scale-out N``: the options and scenario section it reads, and the steps it adds after each ladder (fake runner,
clock and servers)."""

import functools
import json

import pytest

from locust_llm.records import Phase
from locust_llm.rundir.events import ScaleOutFailed
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError
from locust_llm.scenario.scale_out import ScaleOutSpec, scale_out_plan
from tests.helpers import REPO

from .fakes import Clock, FakeSession, options
from .test_experiment import run_program

SCENARIO = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
EXTERNAL = "name: ext\nserver: {engine: external, url: 'http://127.0.0.1:8000'}\nvariants: {ref: {}}\n"


def scenario_file(tmp_path, text: str = SCENARIO, extra: str = "") -> str:
    path = tmp_path / "scale.yaml"
    path.write_text(text + extra)
    return str(path)


def test_the_plan_from_the_option_and_the_section():
    spec = ScaleOutSpec()
    assert scale_out_plan(spec, None, "", [1, 4], None) is None  # off by default
    plan = scale_out_plan(spec, 2, "", [1, 4, 2], None)
    assert (plan.servers, plan.level, plan.pairs, plan.urls) == (2, 4.0, 2, [])  # the ladder's highest level
    plan = scale_out_plan(ScaleOutSpec(servers=3, level=2, pairs=1), None, "", [8], None)
    assert (plan.servers, plan.level, plan.pairs) == (3, 2.0, 1)
    assert scale_out_plan(ScaleOutSpec(servers=3), 0, "", [8], None) is None  # --scale-out 0 turns it off
    # Extra URLs of an external server imply the count; --host is the first server.
    plan = scale_out_plan(spec, None, "http://10.0.0.2:8000/, http://10.0.0.3:8000", [4], "http://10.0.0.1:8000")
    assert (plan.servers, plan.urls) == (3, ["http://10.0.0.2:8000", "http://10.0.0.3:8000"])


@pytest.mark.parametrize(
    "servers, urls, host, message",
    [
        (1, "", None, "0 \\(off\\) or 2..16 servers, found 1"),
        (17, "", None, "found 17"),
        (2, "http://10.0.0.2:8000", None, "launched servers get their replicas started by locust-llm"),
        (3, "http://10.0.0.2:8000", "http://10.0.0.1:8000", "needs 2 URL\\(s\\) besides --host .* found 1"),
        (2, "", "http://10.0.0.1:8000", "needs 1 URL\\(s\\) besides --host"),
        (-5, "", None, "0 \\(off\\) or 2..16 servers, found -5"),  # an error, never "the scenario's"
        (-5, "http://10.0.0.2:8000", "http://10.0.0.1:8000", "found -5"),
        (None, "http://10.0.0.1:8000/", "http://10.0.0.1:8000", "repeats http://10.0.0.1:8000"),
        (None, "10.0.0.2:8000", "http://10.0.0.1:8000", "--scale-out-urls must be http\\(s\\) URLs"),
    ],
)
def test_bad_settings_name_the_fix(servers, urls, host, message):
    with pytest.raises(ValueError, match=message):
        scale_out_plan(ScaleOutSpec(), servers, urls, [4], host)


def test_the_scenario_section_and_the_options_through_load_plan(tmp_path):
    given = {"report_dir": str(tmp_path), "run_id": "s"}
    with pytest.raises(ScenarioError, match=r"scale_out\.servers.*0 \(off\) or 2 and more"):
        load_plan(options(scenario=scenario_file(tmp_path, extra="scale_out: {servers: 1}\n"), **given))
    with pytest.raises(ScenarioError, match="did you mean 'min_efficiency'"):
        load_plan(options(scenario=scenario_file(tmp_path, extra="scale_out: {min_efficency: 0.9}\n"), **given))
    with pytest.raises(ScenarioError, match="run them separately"):
        load_plan(options(scenario=scenario_file(tmp_path), scale_out=2, soak="2m", **given))
    plan = load_plan(options(scenario=scenario_file(tmp_path, extra="scale_out: {servers: 2, level: 1}\n"), **given))
    assert (plan.scale_out.servers, plan.scale_out.level) == (2, 1.0)
    plan = load_plan(
        options(
            scenario=scenario_file(tmp_path, EXTERNAL),
            host="http://u:hunter22@127.0.0.1:8000",
            scale_out_urls="http://u:hunter22@127.0.0.1:8001",
            **given,
        )
    )
    assert plan.scale_out.urls == ["http://u:hunter22@127.0.0.1:8001"] and plan.scale_out.servers == 2


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    return clock


def scale_rows(experiment) -> list[tuple]:
    return [
        (r.variant, r.step, r.servers, r.level, r.server_level, r.pair, r.users)
        for r in experiment.run.steps
        if r.servers
    ]


def test_after_each_ladder_one_server_against_two_in_abba_pairs(tmp_path, clock):
    sent = []

    def watch(experiment):
        state = experiment.state
        if state.phase in (Phase.WARMUP, Phase.STEADY):
            sent.append((state.variant, state.step, state.base_urls, experiment.session.replicas))

    experiment, ticks, phases, env = run_program(
        tmp_path, ladder="1,3", step_duration=2, warmup=1, scale_out=2, watch=watch
    )
    rows = scale_rows(experiment)
    # Steps 2..5 follow the two ladder steps; the levels are per server x servers; users follow the levels.
    assert rows == [
        (v, 2 + i, n, 3.0 * n, 3.0, pair, 3 * n)
        for v in ("baseline", "spec-k4")
        for i, (n, pair) in enumerate([(1, 0), (2, 0), (2, 1), (1, 1)])
    ]
    assert [r.variant for r in experiment.run.steps] == ["baseline"] * 6 + ["spec-k4"] * 6  # before the next
    one = "http://127.0.0.1:1/baseline"
    by_step = {(v, s): (urls, replicas) for v, s, urls, replicas in sent}
    assert by_step[("baseline", 0)] == ((), [])  # the ladder's steps go to the one server, no replica up
    assert by_step[("baseline", 2)] == ((one,), ["http://127.0.0.1:2/baseline"])
    assert by_step[("baseline", 3)] == ((one, "http://127.0.0.1:2/baseline"), ["http://127.0.0.1:2/baseline"])
    assert experiment.session.replicas_started == [
        ("baseline", ["http://127.0.0.1:2/baseline"]),
        ("spec-k4", ["http://127.0.0.1:2/spec-k4"]),
    ]
    # The ladder steps' ticks never saw a scale-out step's users; the replicas are gone after each variant.
    assert all(t[0] == 6 for (v, s, p), t in zip(phases, ticks, strict=False) if s in (3, 4) and p == Phase.STEADY)
    assert experiment.session.replicas == []
    env_doc = json.loads((experiment.run.path / "env.json").read_text())
    assert env_doc["scale_out"] == {"servers": 2, "level": 3.0, "pairs": 2, "min_efficiency": None, "urls": []}
    assert experiment.progress()["steps"] == 12


def test_interleaved_variants_scale_out_after_the_last_block(tmp_path, clock):
    experiment, *_ = run_program(
        tmp_path, ladder="1,3", step_duration=2, warmup=1, scale_out=2, repeats=2, order="interleaved"
    )
    variants = [r.variant for r in experiment.run.steps]
    assert [r.servers for r in experiment.run.steps[:8]] == [None] * 8  # every interleaved block first
    assert variants[8:] == ["baseline"] * 4 + ["spec-k4"] * 4
    assert [r[2] for r in scale_rows(experiment)] == [1, 2, 2, 1] * 2


def test_servers_that_do_not_come_up_are_a_run_event_and_no_step(tmp_path, clock):
    session = functools.partial(FakeSession, fail_replicas=True)
    experiment, *_ = run_program(tmp_path, session_factory=session, ladder="1", step_duration=2, warmup=1, scale_out=2)
    assert scale_rows(experiment) == []
    failed = [e for e in experiment.run.events if isinstance(e, ScaleOutFailed)]
    assert [e.variant for e in failed] == ["baseline", "spec-k4"]
    assert "does not answer" in failed[0].error


def test_a_password_in_a_replica_url_reaches_no_file(tmp_path, clock):
    secret_url = "http://u:hunter22@127.0.0.1:8001"
    experiment, *_ = run_program(
        tmp_path,
        scenario=scenario_file(tmp_path, EXTERNAL),
        ladder="1",
        step_duration=2,
        warmup=1,
        host="http://127.0.0.1:8000",
        scale_out_urls=secret_url,
    )
    assert [r[2] for r in scale_rows(experiment)] == [1, 2, 2, 1]
    assert experiment.session.replicas_started == [("ref", [secret_url])]  # the load still reaches it
    written = "".join(p.read_text(errors="replace") for p in experiment.run.path.glob("*.json"))
    assert "127.0.0.1:8001" in written and "hunter22" not in written


def test_sigterm_during_a_scale_out_step_stops_the_further_servers_and_keeps_the_step(tmp_path, clock):
    def watch(experiment):
        row = experiment.run.steps[-1] if experiment.run.steps else None
        if row is not None and row.servers == 2 and experiment.state.phase == Phase.STEADY:
            experiment.interrupt("SIGTERM")

    experiment, *_ = run_program(tmp_path, ladder="1", step_duration=2, warmup=1, scale_out=2, watch=watch)
    rows = scale_rows(experiment)
    assert [r[2] for r in rows] == [1, 2]  # the one-server step, and the two-server step it stopped in
    assert all(r.t_end >= r.t_steady for r in experiment.run.steps)
    assert experiment.session.replicas == [] and [v for v, _ in experiment.session.replicas_started] == ["baseline"]
    assert [e.kind for e in experiment.run.events] == ["interrupted"]
