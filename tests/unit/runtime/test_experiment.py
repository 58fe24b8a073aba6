"""Experiment.program() with a fake runner, clock and servers: the ladder it walks, the windows it writes."""

import math

import numpy as np
import pytest

from locust_llm.analysis.cycles import Batches
from locust_llm.records import Phase
from locust_llm.rundir.env import ServerEnv
from locust_llm.rundir.events import ContextTooLong, ServerExited, ServerStartFailed, SweepStopped
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime.cockpit import live_view
from locust_llm.runtime.experiment import Experiment
from locust_llm.runtime.live import LiveStats
from locust_llm.runtime.plan import load_plan
from tests.helpers import REPO

from .fakes import Clock, FakeEnvironment, FakeSession, options, prompts_built_at_once

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


class Classes(dict):
    def __missing__(self, mode):
        return f"{mode}-user"


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    return clock


def run_program(tmp_path, session_factory=FakeSession, follow=None, watch=None, **given):
    """``follow(runner, tick)``: how the fake Locust runner reacts to each tick (default: not at all);
    ``watch(experiment)``: looks at the experiment on every tick."""
    plan = load_plan(options(**{"scenario": SCENARIO, "report_dir": str(tmp_path), "run_id": "unit", **given}))
    env = FakeEnvironment()
    experiment = prompts_built_at_once(Experiment(env, plan, Classes(), session=session_factory))
    ticks, phases = [], []
    for tick in experiment.program():
        if follow is not None:
            follow(env.runner, tick)
        if watch is not None:
            watch(experiment)
        ticks.append(tick)
        phases.append((experiment.state.variant, experiment.state.step, experiment.state.phase))
        if experiment.state.phase == Phase.DRAIN and not experiment.recorder.tally:
            # the one worker reports that it is idle and has sent nothing more
            experiment.recorder.on_batch(
                {"worker": 0, "records": [], "client": [], "sent_total": 0, "users_running": 0, "final": False}
            )
        assert len(ticks) < 10_000
    experiment.recorder.close()
    return experiment, ticks, phases, env


def test_walks_every_variant_over_the_ladder_with_exact_windows(tmp_path, clock):
    experiment, ticks, phases, env = run_program(tmp_path, ladder="1,3", step_duration=2, warmup=1)
    rows = experiment.run.steps
    assert [(r.variant, r.level, r.users) for r in rows] == [
        ("baseline", 1, 1),
        ("baseline", 3, 3),
        ("spec-k4", 1, 1),
        ("spec-k4", 3, 3),
    ]
    for row in rows:
        # Each window is held until the clock passes its end: at most one clock step longer.
        assert 1.0 <= row.t_steady - row.t_start <= 1.0 + 2 * clock.step
        assert 2.0 <= row.t_end - row.t_steady <= 2.0 + 2 * clock.step
        assert row.t_end <= next((r.t_start for r in rows if r.t_start > row.t_start), math.inf)
    users = {
        (v, s) for (v, s, p), t in zip(phases, ticks, strict=False) if p in (Phase.WARMUP, Phase.STEADY) for _ in [t]
    }
    assert users == {("baseline", 0), ("baseline", 1), ("spec-k4", 0), ("spec-k4", 1)}
    assert all(
        t == (3, 3, ["closed-user"])
        for (v, s, p), t in zip(phases, ticks, strict=False)
        if s == 1 and p in (Phase.WARMUP, Phase.STEADY)
    )
    assert all(t[0] == 0 for (v, s, p), t in zip(phases, ticks, strict=False) if p == Phase.DRAIN)
    sent = [data["phase"] for name, data in env.runner.messages]
    assert sent[-1] == Phase.IDLE and Phase.STARTING in sent
    assert experiment.session.started == ["baseline", "spec-k4"]


def test_progress_says_where_the_run_is_and_how_long_is_left(tmp_path, clock):
    seen = {}

    def watch(experiment):
        state = experiment.state
        if state.phase in (Phase.WARMUP, Phase.STEADY):
            seen.setdefault((state.variant, state.level, state.phase), experiment.progress())

    experiment, *_ = run_program(tmp_path, ladder="1,3", step_duration=2, warmup=1, watch=watch)
    first = seen[("baseline", 1.0, Phase.WARMUP)]
    assert (first["step"], first["steps"], first["variant"], first["level"]) == (1, 4, "baseline", 1.0)
    # warm-up 1 s + steady 2 s left in the step, three more steps of 3 s (each read moves the clock 0.25 s)
    assert 3.0 - 4 * clock.step <= first["step_left_s"] <= 3.0
    assert first["run_left_s"] == pytest.approx(first["step_left_s"] + 3 * 3.0)
    last = seen[("spec-k4", 3.0, Phase.STEADY)]
    assert last["step"] == 4 and last["run_left_s"] == last["step_left_s"] <= 2.0
    view = live_view(experiment)
    assert {(p["variant"], p["level"], p["done"]) for p in view["points"]} == {
        ("baseline", 1.0, True),
        ("baseline", 3.0, True),
        ("spec-k4", 1.0, True),
        ("spec-k4", 3.0, True),
    }
    assert view["colors"]["baseline"] != view["colors"]["spec-k4"] and view["outcome"] is False
    # Warnings as they happen: once per key, and run events in words (no log tail in a one-line warning).
    experiment.warn("step_extended", "spec-k4 at level 3: too few requests", key=("spec-k4", 1))
    experiment.warn("step_extended", "spec-k4 at level 3: too few requests", key=("spec-k4", 1))
    experiment.run.note(ServerExited(variant="spec-k4", log_tail="line 1\nline 2"))
    texts = [w["text"] for w in live_view(experiment)["warnings"] if w["kind"] in ("step_extended", "server_exited")]
    assert texts == ["spec-k4 at level 3: too few requests", "server exited: variant spec-k4"]


def test_repeats_walk_the_ladder_again(tmp_path, clock):
    scenario = tmp_path / "repeats.yaml"
    scenario.write_text(
        (REPO / "scenarios" / "tiny-cpu-test.yaml")
        .read_text()
        .replace("  mode: closed\n", "  mode: closed\n  repeats: 2\n")
    )
    experiment, *_ = run_program(
        tmp_path, ladder="1,2", step_duration=1, warmup=0, variant="baseline", scenario=str(scenario)
    )
    assert [(r.step, r.level) for r in experiment.run.steps] == [(0, 1), (1, 2), (2, 1), (3, 2)]


def test_a_server_that_dies_ends_its_variant_and_is_recorded(tmp_path, clock):
    def dying(plan, run):
        return FakeSession(plan, run, die_after=5)

    experiment, ticks, phases, env = run_program(tmp_path, dying, ladder="1,2,4", step_duration=3, warmup=1)
    rows = experiment.run.steps
    assert [r.variant for r in rows] == ["baseline", "spec-k4"]  # one step each, then the server was gone
    assert [e.kind for e in experiment.run.events] == ["server_exited"]


def test_a_server_that_does_not_start_is_skipped_and_recorded(tmp_path, clock):
    def failing(plan, run):
        return FakeSession(plan, run, fail_start=("baseline",))

    experiment, *_ = run_program(tmp_path, failing, ladder="1", step_duration=1, warmup=0)
    assert {r.variant for r in experiment.run.steps} == {"spec-k4"}
    (event,) = experiment.run.events
    assert isinstance(event, ServerStartFailed) and "would not start" in event.error


def test_open_loop_runs_one_dispatcher_per_process(tmp_path, clock):
    experiment, ticks, phases, _ = run_program(
        tmp_path, mode="open", ladder="5,20", step_duration=1, warmup=0, variant="baseline"
    )
    steady = [t for (v, s, p), t in zip(phases, ticks, strict=False) if p == Phase.STEADY]
    assert steady and all(t == (1, 1, ["open-user"]) for t in steady)


def test_a_step_down_stops_the_surplus_users_before_its_window(tmp_path, clock):
    def one_user_per_tick(runner, tick):
        # Locust stops (or starts) users over several ticks; streams in flight finish first
        target = tick[0]
        runner.user_count += (target > runner.user_count) - (target < runner.user_count)

    experiment, ticks, phases, env = run_program(
        tmp_path, follow=one_user_per_tick, ladder="4,1", step_duration=2, warmup=1, variant="baseline"
    )
    sent = [(d["step"], d["phase"]) for name, d in env.runner.messages]
    first_warmup = sent.index((1, Phase.WARMUP))
    assert (0, Phase.DRAIN) in sent[:first_warmup]  # nobody sends between the windows
    drain = sent.index((0, Phase.DRAIN))
    assert env.runner.users_at_message[drain] == 4  # the surplus was still running when the drain began
    assert env.runner.users_at_message[first_warmup] == 1  # step 1 starts with its one user, not four
    assert experiment.run.steps[1].t_start >= experiment.run.steps[0].t_end


def repeats_scenario(tmp_path, extra: str = "", server_extra: str = "") -> str:
    scenario = tmp_path / "interleaved.yaml"
    text = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
    text = text.replace("  mode: closed\n", f"  mode: closed\n  repeats: 2\n{extra}")
    text = text.replace("  startup_timeout_s: 60\n", f"  startup_timeout_s: 60\n{server_extra}")
    scenario.write_text(text)
    return str(scenario)


def test_interleaved_blocks_alternate_abba_per_level_with_paired_step_numbers(tmp_path, clock):
    experiment, ticks, phases, env = run_program(
        tmp_path, ladder="1,4", step_duration=1, warmup=0, scenario=repeats_scenario(tmp_path)
    )
    assert [(r.variant, r.level, r.step) for r in experiment.run.steps] == [
        ("baseline", 1, 0),
        ("spec-k4", 1, 0),
        ("spec-k4", 1, 2),
        ("baseline", 1, 2),
        ("baseline", 4, 1),
        ("spec-k4", 4, 1),
        ("spec-k4", 4, 3),
        ("baseline", 4, 3),
    ]
    session = experiment.session
    assert session.started == ["baseline", "spec-k4"]  # both up once, for the whole run
    assert session.activated[2:] == ["baseline", "spec-k4", "spec-k4", "baseline"] * 2
    # between two blocks every user is stopped: no stream of one server overlaps the next block's window
    sent = [(d["variant"], d["step"], d["phase"]) for name, d in env.runner.messages]
    for before, after in zip(experiment.run.steps, experiment.run.steps[1:], strict=False):
        first = sent.index((after.variant, after.step, Phase.WARMUP))
        assert (before.variant, before.step, Phase.DRAIN) in sent[:first]
        assert after.t_start >= before.t_end


def test_sequential_order_keeps_one_variant_at_a_time_even_with_repeats(tmp_path, clock):
    experiment, *_ = run_program(
        tmp_path, ladder="1", step_duration=1, warmup=0, order="sequential", scenario=repeats_scenario(tmp_path)
    )
    assert [(r.variant, r.step) for r in experiment.run.steps] == [
        ("baseline", 0),
        ("baseline", 1),
        ("spec-k4", 0),
        ("spec-k4", 1),
    ]


def test_interleave_restart_starts_the_blocks_server_each_time(tmp_path, clock):
    experiment, *_ = run_program(
        tmp_path,
        ladder="1",
        step_duration=1,
        warmup=0,
        scenario=repeats_scenario(tmp_path, server_extra="  interleave: restart\n"),
    )
    assert experiment.session.started == ["baseline", "spec-k4", "spec-k4", "baseline"]
    assert not experiment.session.servers  # every server stopped at the end


def test_a_short_step_is_extended_until_enough_requests_completed(tmp_path, clock):
    scenario = repeats_scenario(tmp_path, extra="  max_extend_s: 4\n  min_requests: 10\n")
    plan = load_plan(
        options(
            scenario=scenario,
            report_dir=str(tmp_path),
            run_id="ext",
            ladder="1",
            step_duration=2,
            warmup=0,
            variant="baseline",
        )
    )
    env = FakeEnvironment()
    experiment = prompts_built_at_once(Experiment(env, plan, Classes(), session=FakeSession))
    for _ in experiment.program():
        state = experiment.state
        if state.phase == Phase.STEADY and state.step == 1:  # the second step reports enough at once
            experiment.recorder.on_batch(
                {
                    "worker": 0,
                    "records": [],
                    "client": [],
                    "sent_total": 0,
                    "users_running": 1,
                    "progress": {"baseline|1": [40, 4000]},
                }
            )
        if state.phase == Phase.DRAIN:
            experiment.recorder.on_batch(
                {
                    "worker": 0,
                    "records": [],
                    "client": [],
                    "sent_total": 0,
                    "users_running": 0,
                    "progress": {"baseline|1": [40, 4000]},
                }
            )
    experiment.recorder.close()
    first, second = experiment.run.steps
    assert first.extended_s == 4 and second.extended_s == 0
    assert first.t_end - first.t_steady >= 6


def test_context_lengths_follow_the_ladder_as_blocks_of_their_own(tmp_path, clock):
    scenario = repeats_scenario(tmp_path, extra="  context_tokens: [256, 1024]\n  context_levels: [2]\n")
    experiment, ticks, phases, env = run_program(tmp_path, ladder="1", step_duration=1, warmup=0, scenario=scenario)
    assert [(r.variant, r.level, r.step, r.context) for r in experiment.run.steps] == [
        ("baseline", 1, 0, None),
        ("spec-k4", 1, 0, None),
        ("spec-k4", 1, 1, None),
        ("baseline", 1, 1, None),
        ("baseline", 2, 2, 256),
        ("spec-k4", 2, 2, 256),
        ("spec-k4", 2, 3, 256),
        ("baseline", 2, 3, 256),
        ("baseline", 2, 4, 1024),
        ("spec-k4", 2, 4, 1024),
        ("spec-k4", 2, 5, 1024),
        ("baseline", 2, 5, 1024),
    ]
    # the workers learn the prompt length with the step
    sent = {(d["step"], d["context"]) for name, d in env.runner.messages if d["phase"] == Phase.STEADY}
    assert sent == {(0, 0), (1, 0), (2, 256), (3, 256), (4, 1024), (5, 1024)}


def sweep_scenario(tmp_path) -> str:
    text = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
    text = text.replace("  spec-k4:\n", "  spec:\n").replace("n_max: 4", "n_max: [1, 2]")
    text = text.replace("  mode: closed\n", "  mode: closed\n  repeats: 2\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return str(path)


def test_a_sweep_stops_climbing_where_every_setting_is_clearly_slower(tmp_path, clock, monkeypatch):
    rng = np.random.default_rng(0)

    def step_batches(variant, step, start, end):  # live throughput: every k at half the baseline's
        tokens = rng.poisson(100 if variant == "baseline" else 50, 10).astype(float)
        return Batches(tokens, np.ones(10), "cycles", 10, 1)

    monkeypatch.setattr(LiveStats, "step_batches", lambda self, *window: step_batches(*window))
    experiment, *_ = run_program(tmp_path, ladder="1,4", step_duration=5, warmup=0, scenario=sweep_scenario(tmp_path))
    assert {(r.variant, r.level) for r in experiment.run.steps} == {
        ("baseline", 1),
        ("spec-k1", 1),
        ("spec-k2", 1),
    }  # level 4 never measured
    (event,) = [e for e in experiment.run.events if isinstance(e, SweepStopped)]
    assert event.sweep == "spec" and event.level == 1 and max(event.speedups) < 0.6


def test_a_context_length_the_server_cannot_hold_is_left_out_and_said(tmp_path, clock, monkeypatch):
    scenario = repeats_scenario(tmp_path, extra="  context_tokens: [256, 4000]\n  context_levels: [1]\n")

    class SizedSession(FakeSession):
        def start(self, variant):
            server = super().start(variant)
            self.run.env.servers[variant] = ServerEnv(context_size=512)  # llama.cpp -c 2048 -np 4
            return server

    experiment, *_ = run_program(
        tmp_path, session_factory=SizedSession, ladder="1", step_duration=1, warmup=0, scenario=scenario
    )
    assert {r.context for r in experiment.run.steps} == {None, 256}
    events = [e for e in experiment.run.events if isinstance(e, ContextTooLong)]
    assert events and events[0].context == 4000 and events[0].server_context == 512


def test_finish_writes_the_last_telemetry_sample_before_the_analysis_reads_the_files(tmp_path, clock, monkeypatch):
    # Stopping the servers takes a last telemetry sample; an analysis that ran before it reached the part files
    # would disagree with a later `locust-llm report` of the same run.
    experiment, *_ = run_program(tmp_path, ladder="1", step_duration=1, warmup=0, variant="baseline")
    telemetry = experiment.session.telemetry
    flushes_seen_by_analysis = []
    monkeypatch.setattr(
        experiment_module, "finish_run", lambda path, gates: flushes_seen_by_analysis.append(telemetry.flushes)
    )
    flushes_before = telemetry.flushes
    experiment.finish(final=False)
    assert flushes_seen_by_analysis and flushes_seen_by_analysis[0] > flushes_before
