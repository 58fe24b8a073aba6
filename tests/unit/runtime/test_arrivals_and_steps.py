"""The open-loop arrival clock and the step board every process keeps (pure parts of the runtime)."""

import statistics

import gevent

from locust_llm.records import Phase
from locust_llm.runtime.arrivals import ArrivalClock
from locust_llm.runtime.steps import StepBoard, StepState


def test_constant_arrivals_are_evenly_spaced():
    clock = ArrivalClock(rate=4.0, t0=100.0, seed=(0, 0, 0), kind="constant", burstiness=1.0)
    times = [clock.next() for _ in range(8)]
    assert times == [100.0 + 0.25 * (i + 1) for i in range(8)]


def test_poisson_and_gamma_have_the_rate_and_their_burstiness():
    n = 20_000
    for kind, burstiness, cv in (("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)):
        clock = ArrivalClock(rate=10.0, t0=0.0, seed=(1, 2, 3), kind=kind, burstiness=burstiness)
        times = [clock.next() for _ in range(n)]
        intervals = [b - a for a, b in zip([0.0] + times, times, strict=False)]
        mean = statistics.fmean(intervals)
        assert abs(mean - 0.1) < 0.005, kind
        assert abs(statistics.pstdev(intervals) / mean - cv) < 0.08 * cv, (kind, burstiness)


def test_same_seed_same_arrivals_other_worker_other_arrivals():
    def first(seed):
        clock = ArrivalClock(rate=5.0, t0=0.0, seed=seed, kind="poisson", burstiness=1.0)
        return [clock.next() for _ in range(5)]

    assert first((0, 1, 2)) == first((0, 1, 2))
    assert first((0, 1, 2)) != first((0, 2, 2))


def test_step_board_wakes_waiters_once_per_change():
    board = StepBoard()
    state = StepState(run_id="r", variant="v", step=0, level=1.0, phase=Phase.WARMUP, base_url="http://x")
    woken = []

    def waiter():
        woken.append(board.changed.wait(timeout=5))

    g = gevent.spawn(waiter)
    gevent.sleep(0)
    board.update(state, received_at=10.0)
    g.join(timeout=5)
    assert woken == [True] and board.state == state and board.started_at == 10.0
    changed = board.changed
    board.update(state, received_at=11.0)  # the shape repeats its state every tick: nothing changes
    assert board.changed is changed and board.started_at == 10.0
    board.update(StepState(**{**state.to_dict(), "phase": Phase.STEADY}), received_at=12.0)
    assert board.started_at == 10.0  # same step, new phase: the step's start stays
    assert board.changed is not changed and changed.is_set()
    board.update(StepState(**{**state.to_dict(), "step": 1}), received_at=13.0)
    assert board.started_at == 13.0 and board.state.active


def test_only_warmup_and_steady_with_a_server_are_active():
    assert not StepState().active
    assert not StepState(phase=Phase.STEADY).active  # no server yet
    assert StepState(phase=Phase.STEADY, base_url="http://x").active
    assert not StepState(phase=Phase.DRAIN, base_url="http://x").active
