"""Worker clocks as the run records and the report shows them: the estimates in env.json, a ``clock_uncertain``
event for a worker measured less certainly than the bound, and the report's text, from hand-made exchanges."""

import pytest

from locust_llm.records import epoch_anchor
from locust_llm.report.sections import clocks_text
from locust_llm.rundir import RunDir, layout, read_json
from locust_llm.rundir.clocks import UNCERTAINTY_MAX_S, ClockSample
from locust_llm.rundir.env import ClocksEnv
from locust_llm.rundir.events import ClockUncertain
from locust_llm.runtime.clocksync import write_clocks


def exchange(worker, t0, offset, out_s, back_s, turn_s=0.0001):
    """Legs of ``out_s`` and ``back_s``: measured offset = offset + (out - back) / 2, uncertainty (out + back) / 2."""
    t1 = t0 + out_s + offset
    t2 = t1 + turn_s
    t3 = t2 - offset + back_s
    return ClockSample(worker=worker, t=t3, t0=t0, t1=t1, t2=t2, t3=t3)


def test_offsets_reach_env_json_an_uncertain_worker_is_an_event_and_the_report_warns(tmp_path):
    # worker 0: +200 ms, then +200.4 ms (it drifted), over fast exchanges; worker 1: -10 ms over a 20 ms round trip
    samples = [
        exchange(0, 1000.0, 0.2, 0.0003, 0.0002),
        exchange(0, 1005.0, 0.2004, 0.0003, 0.0002),
        exchange(1, 1000.0, -0.010, 0.012, 0.008),
        exchange(1, 900.0, 0.5, 0.0001, 0.0001),
    ]  # long before the run (since - 10 s): not counted
    run = RunDir(tmp_path, "r")
    write_clocks(run, samples, since=1002.0)
    clocks = read_json(run.file(layout.ENV))["clocks"]
    assert clocks["bound_s"] == UNCERTAINTY_MAX_S == 0.005
    w0, w1 = clocks["workers"]["0"], clocks["workers"]["1"]
    assert w0["offset_s"] == pytest.approx(0.20005) and w0["uncertainty_s"] == pytest.approx(0.00025)
    assert w0["drift_s"] == pytest.approx(0.0004) and w0["exchanges"] == 2
    assert w1["offset_s"] == pytest.approx(-0.008) and w1["uncertainty_s"] == pytest.approx(0.010)
    assert w1["rtt_s"] == pytest.approx(0.020) and w1["exchanges"] == 1
    (event,) = [e for e in run.events if isinstance(e, ClockUncertain)]
    assert (event.worker, event.bound_s) == (1, 0.005) and event.uncertainty_s == pytest.approx(0.010)
    write_clocks(run, samples, since=1002.0)  # measured again at the end: still one event per worker
    assert [e["worker"] for e in read_json(run.file(layout.STEPS))["events"]] == [1]
    assert clocks_text(ClocksEnv.model_validate(clocks)) == (
        "worker 0 +200.05 ms \u00b1 0.25 ms (drift 0.40 ms, 2 exchanges); "
        "worker 1 -8.00 ms \u00b1 10.00 ms (drift 0.00 ms, 1 exchanges) WARNING: uncertain beyond 5 ms, requests "
        "near window edges may be mislabelled"
    )


def test_no_exchanges_no_clock_entry(tmp_path):
    run = RunDir(tmp_path, "r")
    write_clocks(run, [], since=0.0)
    assert run.env.clocks is None and not run.file(layout.CLOCKS).exists()
    assert clocks_text(run.env.clocks) is None


def test_a_process_s_clock_is_anchored_where_nothing_came_between_its_two_reads():
    # perf_counter and the wall clock as a process reads them: 1,000,000 s apart; the first try is preempted for
    # 5 ms between its perf_counter read and its wall-clock read, the others take 1 us.
    tries = [(10.0, 1_000_010.005, 10.005), (20.0, 1_000_020.0000005, 20.000001), (30.0, 1_000_030.0000006, 30.000001)]
    perf = iter(x for before, _, after in tries for x in (before, after))
    wall = iter(w for _, w, _ in tries)
    anchor = epoch_anchor(tries=3, perf=lambda: next(perf), wall=lambda: next(wall))
    assert abs(anchor - 1_000_000.0) < 1e-6  # the preempted try alone would be 2.5 ms off
