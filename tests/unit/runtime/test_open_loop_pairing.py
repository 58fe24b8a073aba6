"""A dropped open-loop arrival keeps its number: the k-th arrival of a step is request k in every variant, so one
variant's drop does not shift the pairs (prompt and intended time) of every later request."""

import math
from contextlib import nullcontext

import gevent
import gevent.event
import pytest
from locust.env import Environment

from locust_llm.records import ErrorClass, Phase, now
from locust_llm.runtime.steps import StepState
from locust_llm.runtime.users import OpenLoopUser, context_of
from locust_llm.scenario import LoadSpec
from locust_llm.workload import PromptItem
from locust_llm.workload.workload import Lead

RATE = 1000.0  # arrivals 1 ms apart: the test waits for its three arrivals, not for a tuned time


class HeldWorkload:
    """Hands out prompt indices and holds each request until released; then it is sent to a port where nothing
    listens (no server here): a refused connection, recorded."""

    counter = None
    lead = Lead(0)  # prompts as given: this test is about their numbering
    trace = conversations = None  # generated prompts: neither a trace nor conversations

    def __init__(self):
        self.release = gevent.event.Event()
        self.asked: list[int] = []

    def item(self, worker: int, step: int, index: int, context: int = 0):
        self.asked.append(index)
        self.release.wait()
        return PromptItem("default", f"prompt {index}", 2, 4, exact=False)


class Shipper:
    def __init__(self):
        self.records = []
        self.created = 0

    def add(self, record) -> None:
        self.records.append(record)

    def measured_stream(self, record):
        return nullcontext()


def open_user(load: LoadSpec) -> tuple[OpenLoopUser, HeldWorkload, Shipper]:
    """An open-loop user of one process, in a steady step, whose requests go through ``HeldWorkload``."""
    environment = Environment(user_classes=[OpenLoopUser])
    workload, shipper = HeldWorkload(), Shipper()
    context = context_of(environment)
    context.configure(load, worker=0, engine="external", shipper=shipper, workload_factory=lambda url: workload)
    context.board.update(
        StepState(
            run_id="r",
            variant="spec",
            step=3,
            level=RATE,
            phase=Phase.STEADY,
            mode="open",
            base_url="http://127.0.0.1:9",
            t_start=now(),
        ),
        received_at=now(),
    )
    user = OpenLoopUser(environment)
    user.on_start()
    return user, workload, shipper


def test_a_dropped_arrival_keeps_its_number_and_later_arrivals_keep_their_pairs():
    user, workload, shipper = open_user(
        LoadSpec(mode="open", arrival="constant", max_inflight=1, at_max_inflight="drop")
    )
    user.arrive()  # arrival 0: sent, held in flight
    user.arrive()  # arrival 1: the one slot is taken, dropped
    workload.release.set()
    user.inflight.join()
    user.arrive()  # arrival 2: sent
    user.inflight.join()
    by_seq = {r.seq: r for r in shipper.records}
    assert sorted(by_seq) == [0, 1, 2]
    assert by_seq[1].error_class == ErrorClass.DROPPED
    assert workload.asked == [0, 2]  # the third arrival gets the third prompt, as where nothing was dropped
    # ...and the third arrival's intended time: constant arrivals, two gaps after the first
    # (epoch seconds: floats step by about 0.2 us)
    assert by_seq[2].t_intended - by_seq[0].t_intended == pytest.approx(2 / RATE, abs=1e-6)


def test_a_held_arrival_waits_for_the_slot_keeps_its_number_and_its_intended_time():
    # at_max_inflight: hold, the default
    user, workload, shipper = open_user(LoadSpec(mode="open", arrival="constant", max_inflight=1))
    user.arrive()  # arrival 0: sent, in flight until the workload is released
    user.arrive()  # arrival 1: the one slot is taken: it waits
    gevent.sleep(0.05)
    assert workload.asked == [0] and len(user.holding) == 1  # not sent, not dropped
    released_at = now()
    workload.release.set()
    user.holding.join()
    user.inflight.join()
    by_seq = {r.seq: r for r in shipper.records}
    assert sorted(by_seq) == [0, 1] and workload.asked == [0, 1]
    assert by_seq[1].error_class != ErrorClass.DROPPED and by_seq[0].error_class != ErrorClass.DROPPED
    assert by_seq[1].t_slot >= released_at > by_seq[1].t_intended  # it waited for the slot, from its intended time
    assert math.isnan(by_seq[0].t_slot)
