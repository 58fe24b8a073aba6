"""Locust users: closed loop (next request when the last one ends) and open loop (arrivals on a clock).

Both send through ``client.stream.StreamingClient``, tag each record with the current ladder step, report
it to Locust's own stats (response time = end-to-end stream time, length = output tokens) and hand it to
the process's ``RecordShipper``. Nothing raises out of a task.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import gevent
import gevent.lock
import gevent.pool
from locust import User, task

from ..client.engines import cache_extra, request_extra
from ..client.stream import RequestSpec, StreamingClient
from ..fmt import shown
from ..records import ErrorClass, Phase, RequestRecord, now
from ..scenario import LoadSpec
from ..workload import PromptItem, Workload
from ..workload.items import prompt_hash
from .arrivals import ArrivalClock, TraceClock
from .conversations import Dialogue, converse
from .shipper import RecordShipper
from .steps import StepBoard, StepState, step_key

log = logging.getLogger(__name__)

__all__ = [
    "USAGE_CHECKS_PER_STEP",
    "WORKLOAD_READY",
    "Backoff",
    "ClosedLoopUser",
    "OpenLoopUser",
    "ProcessContext",
    "context_of",
]

WORKLOAD_READY = "llm_workload_ready"

# Requests per step and load process whose exact server total a tokenizer checks against the text (all of them
# would call the server's /tokenize once each, between steps).
USAGE_CHECKS_PER_STEP = 16


@dataclass
class ProcessContext:
    """What the users of one Locust environment share; configured by the plugin at test start."""

    board: StepBoard = field(default_factory=StepBoard)
    load: LoadSpec = field(default_factory=LoadSpec)
    worker: int = 0
    engine: str = "external"
    shipper: RecordShipper | None = None
    workload_factory: Callable[[str], Workload] | None = None
    workloads: dict[str, Workload] = field(default_factory=dict)
    workload_lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)
    announce: Callable[[str], None] = lambda base_url: None  # a workload is built (``WORKLOAD_READY``)
    request_seq: itertools.count = field(default_factory=itertools.count)
    user_seq: itertools.count = field(default_factory=itertools.count)  # each closed-loop user's number in this process
    server_seq: itertools.count = field(default_factory=itertools.count)  # round-robin over a step's servers
    step_index: dict[tuple, itertools.count] = field(default_factory=dict)
    usage_checks: dict[tuple, int] = field(default_factory=dict)  # per step: requests whose total was checked

    def configure(
        self,
        load: LoadSpec,
        worker: int,
        engine: str,
        shipper: RecordShipper,
        workload_factory: Callable[[str], Workload],
        announce: Callable[[str], None] = lambda base_url: None,
    ) -> None:
        """New run settings; the step board survives (the shape may have spoken before test_start). ``announce``
        tells the master that this process's workload for a server is built."""
        self.load, self.worker, self.engine = load, worker, engine
        self.shipper, self.workload_factory, self.announce = shipper, workload_factory, announce
        self.workloads.clear()
        self.step_index.clear()
        self.usage_checks.clear()

    def workload(self, base_url: str) -> Workload:
        """Built once per server (it tokenizes its prompts); concurrent callers wait for that one build. The master
        hears when it is done (``announce``), built or failed, so an open loop's clock starts after it."""
        with self.workload_lock:
            if base_url not in self.workloads:
                try:
                    self.workloads[base_url] = self.workload_factory(base_url)
                finally:
                    self.announce(base_url)
        return self.workloads[base_url]

    def prepare(self, base_url: str) -> None:
        if base_url not in self.workloads and not self.workload_lock.locked():
            gevent.spawn(self.workload, base_url)

    def step_running(self) -> tuple[str, int] | None:
        """The step this process measures now: the board's while it runs, then the step whose last streams are still
        arriving (``client.ledger`` counts what is sent meanwhile); None in a pause."""
        state = self.board.state
        if state.active:
            return state.variant, state.step
        streaming = self.shipper.streaming if self.shipper is not None else {}
        return next(iter(streaming.values()), None)

    def usage_check_due(self, record: RequestRecord, state: StepState) -> bool:
        """Whether a tokenizer checks this request's usage total: the first ``USAGE_CHECKS_PER_STEP`` of the step's
        steady window in this process, whose figures a suspect server would distort (the check waits until no step
        is measured; the record does not)."""
        if record.phase != Phase.STEADY:
            return False
        key = step_key(state)
        done = self.usage_checks.get(key, 0)
        self.usage_checks[key] = done + 1
        return done < USAGE_CHECKS_PER_STEP

    def next_index(self, state: StepState) -> int:
        """The k-th request of this worker in this step: the same k gets the same prompt in every variant."""
        return next(self.step_index.setdefault(step_key(state), itertools.count()))

    def request_id(self) -> str:
        return f"w{self.worker}-{next(self.request_seq)}"

    def target(self, state: StepState, record: RequestRecord) -> str:
        """Where the request goes: the step's server, or the next of a scale-out step's servers (round-robin in
        this process, as a load balancer spreads requests; a conversation's turns to one server; the record says
        which)."""
        if not state.base_urls:
            return state.base_url
        if record.turn > 0:  # a conversation stays on one server, as a router keeps a session
            record.server = record.conversation % len(state.base_urls)
        else:
            record.server = next(self.server_seq) % len(state.base_urls)
        return state.base_urls[record.server]


def context_of(environment) -> ProcessContext:
    """The context of this environment (one per process, or per in-process node in tests)."""
    context = getattr(environment, "llm_context", None)
    if context is None:
        context = environment.llm_context = ProcessContext()
    return context


BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
RETRY_AFTER_MAX_S = 5.0  # a server's Retry-After is honoured up to this (a step is only seconds long)


class Backoff:
    """How long a closed-loop user waits before its next request: nothing after an answer; after a failure that
    came within ``FAST_FAIL_S`` (refused, reset, an error status, a TLS failure) 50 ms, doubling up to 1 s, or the
    server's ``Retry-After`` up to 5 s, so that a refusing server is not asked thousands of times a second."""

    def __init__(self) -> None:
        self.delay_s = 0.0

    def after(self, record: RequestRecord, retry_after_s: float | None) -> float:
        if record.ok or not (record.failed_fast or retry_after_s is not None):
            self.delay_s = 0.0
            return 0.0
        self.delay_s = min(max(self.delay_s * 2, BACKOFF_FIRST_S), BACKOFF_MAX_S)
        if retry_after_s is not None:
            self.delay_s = max(self.delay_s, min(retry_after_s, RETRY_AFTER_MAX_S))
        return self.delay_s


class LLMUser(User):
    abstract = True

    def on_start(self) -> None:
        self.context = context_of(self.environment)
        self._clients: dict[str, StreamingClient] = {}
        self.backoff = Backoff()
        self.user = next(self.context.user_seq) if isinstance(self, ClosedLoopUser) else -1

    def client_for(self, base_url: str) -> StreamingClient:
        if base_url not in self._clients:
            load = self.context.load
            self._clients[base_url] = StreamingClient(
                base_url, timeouts=load.timeouts, engine=self.context.engine, think_tags=load.reasoning.think_tags
            )
        return self._clients[base_url]

    def on_stop(self) -> None:
        for client in self._clients.values():
            client.close()

    def new_record(self, state: StepState, t_intended: float = math.nan) -> RequestRecord:
        if self.context.shipper is not None:
            self.context.shipper.created += 1  # the master hears of it within 0.1 s (a lost worker's count)
        return RequestRecord(
            run_id=state.run_id,
            variant=state.variant,
            level=state.level,
            step=state.step,
            phase=state.phase,
            mode=state.mode,
            worker=self.context.worker,
            user=self.user,
            request_id=self.context.request_id(),
            t_intended=t_intended,
            api=self.context.load.api,
        )

    def prompt(
        self, workload: Workload, state: StepState, record: RequestRecord, dialogue: Dialogue | None
    ) -> PromptItem:
        """What request ``record.seq`` sends: a conversation's next user message, a trace record, or the workload's
        prompt."""
        if dialogue is not None:
            return workload.conversations.message(self.context.worker, state.step, dialogue.number, record.turn)
        if workload.trace is not None:
            return workload.trace.item(record.seq, state.step)
        return workload.item(self.context.worker, state.step, record.seq, state.context)

    def send(self, state: StepState, record: RequestRecord, dialogue: Dialogue | None = None) -> None:
        """One request from the workload (a turn of ``dialogue``, with its history), timed and recorded whatever
        happens."""
        split, workload = None, None
        try:
            ctx, load = self.context, self.context.load
            workload = ctx.workload(state.base_url)
            if record.seq < 0:  # open loop numbers its arrivals itself, dropped ones included
                record.seq = ctx.next_index(state)
            item = self.prompt(workload, state, record, dialogue)
            record.bucket, record.prompt_tokens = item.bucket, item.prompt_tokens
            record.prompt_hash = prompt_hash(item.prompt)
            extra = request_extra(ctx.engine, item.max_tokens, load.ignore_eos, load.positions.acceptance)
            if workload.lead.mode == "cold" and workload.trace is None:
                # A conversation's turns share one salt (its history is a cache hit on purpose); a trace's shared
                # blocks are hits on purpose too, so its records carry none.
                unit = f"c{dialogue.number}" if dialogue is not None else record.seq
                extra.update(cache_extra(ctx.engine, f"{state.nonce:x}-{ctx.worker}-{state.step}-{unit}"))
            if item.images is not None:
                record.images, record.image_bytes = len(item.images), sum(i.nbytes for i in item.images)
            answer = [] if dialogue is not None else None
            if dialogue is not None:
                record.prompt_tokens += dialogue.tokens  # the server's count, when it gives one, replaces it
                record.history = dialogue.history()
            spec = RequestSpec.of_item(
                item,
                load,
                state.model,
                extra,
                seed=state.seed,
                messages=dialogue.request(item.prompt) if dialogue is not None else None,
                headers=dialogue.headers if dialogue is not None else (),
            )
            client = self.client_for(ctx.target(state, record))
            with ctx.shipper.measured_stream(record) if ctx.shipper is not None else nullcontext():
                split = client.stream(spec, record, answer)
            self.backoff.after(record, client.retry_after)
            if dialogue is not None and record.ok:
                dialogue.add(item.prompt, item.prompt_tokens, answer[0], record.output_tokens)
        except gevent.GreenletExit:
            record.error_class = ErrorClass.CANCELLED
            record.error_message = "stream cancelled: the load was stopped before it finished"
            self.emit(record)
            raise
        except Exception as exc:  # a failed request is data, never a crashed user
            record.error_class = record.error_class or ErrorClass.CLIENT_ERROR
            record.error_message = f"{type(exc).__name__}: {exc}"[:500]
        if record.error_class == ErrorClass.CLIENT_ERROR and math.isnan(record.t_send):
            # Never sent, so not a request: this process cannot build one, and the run stops (exit 2).
            self.backoff.delay_s = BACKOFF_MAX_S
            if self.context.shipper is not None:
                self.context.shipper.created -= 1
                self.context.shipper.refuse(record.error_message or "")
            return
        counter = workload.counter if workload is not None else None
        if split is not None and counter is not None and not split.refine:
            # Exact per-chunk counts: the record goes now; for a sample, the tokenizer checks its total later.
            self.emit(record)
            if self.context.shipper is not None and self.context.usage_check_due(record, state):
                self.context.shipper.check_later(record.request_id, lambda: split.check(counter.count))
            return
        self.emit(
            record,
            split.apply if split is not None and counter is not None else None,
            counter.count if counter is not None else None,
        )

    def emit(self, record: RequestRecord, refine=None, count=None) -> None:
        """Report to Locust's stats now; ship the record once ``refine(count)`` (a tokenizer's per-chunk split,
        after the stream and off the user's path) has run."""
        if math.isnan(record.t_done):
            record.t_done = now()
        # A request never sent (dropped at the cap, failed before sending) keeps t_send NaN in the record.
        start = record.t_done if math.isnan(record.t_send) else record.t_send
        # Locust prints the message in its error report: a server's text in it is escaped (``fmt.shown``).
        exception = None if record.ok else RuntimeError(f"{record.error_class}: {shown(record.error_message, 500)}")
        self.environment.events.request.fire(
            request_type=record.api,
            name=f"{record.variant} @ {record.level:g}",
            response_time=max(record.t_done - start, 0.0) * 1000.0,
            response_length=int(record.output_tokens),
            exception=exception,
            context={"variant": record.variant, "level": record.level, "step": record.step, "bucket": record.bucket},
            response=None,
            start_time=time.time(),
        )
        shipper = self.context.shipper
        if shipper is not None:
            if refine is not None:
                shipper.add_after(record, lambda: refine(count))
            else:
                shipper.add(record)


IDLE_WAIT_S = 0.5


def active_state(board: StepBoard) -> StepState | None:
    """The running step, or None after idling briefly: a task must end between steps so a stop is honoured."""
    if not board.state.active:
        board.changed.wait(timeout=IDLE_WAIT_S)
        return None
    return board.state


class ClosedLoopUser(LLMUser):
    """Sends its next request when the previous one has finished (plus an optional think time); with
    ``load.conversation``, its next conversation when the previous one has ended."""

    def wait_time(self) -> float:
        return self.context.load.think_time_s + self.backoff.delay_s

    @task
    def one_request(self) -> None:
        state = active_state(self.context.board)
        if state is None:
            return
        if self.context.load.conversation is not None:
            converse(self, state, self.context.next_index(state))  # a whole conversation, turn by turn
        else:
            self.send(state, self.new_record(state))


class OpenLoopUser(LLMUser):
    """A dispatcher: arrivals at rate level/workers (or a trace's records at their own times), independent of
    responses, each in its own greenlet (with ``load.conversation``, each arrival a whole conversation).

    The shape runs one of these per worker process. An arrival that finds ``max_inflight`` requests in flight waits
    for a slot, first come first served (``load.at_max_inflight: hold``, vLLM's ``--max-concurrency``), or is
    recorded as dropped, a failure (``drop``); never silently skipped. A conversation's arrival is dropped either way.
    """

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        super().on_start()
        self.inflight = gevent.pool.Pool(self.context.load.max_inflight)
        self.holding = gevent.pool.Group()  # arrivals waiting for a slot (``load.at_max_inflight: hold``)
        self.clock: ArrivalClock | TraceClock | None = None
        self.clock_key: tuple | None = None

    @task
    def arrive(self) -> None:
        state = active_state(self.context.board)
        if state is None:
            return
        key = step_key(state)
        if key != self.clock_key:
            ctx, load = self.context, self.context.load
            ctx.workload(state.base_url)  # ready before the first arrival, so set-up is not schedule lag
            # One clock for all processes (the master's step start); worker i starts i/level later, so constant
            # arrivals from several processes interleave evenly instead of coming in bursts.
            t0 = (
                state.t_start + state.clock_offsets.get(str(ctx.worker), 0.0)
                if not math.isnan(state.t_start)
                else ctx.board.started_at
            )
            trace = ctx.workload(state.base_url).trace
            if trace is not None:
                # Every process replays its share of the trace from the master's step start, at level / trace rate.
                self.clock = TraceClock(trace, t0, state.level / trace.trace.rate, ctx.worker, max(state.workers, 1))
            else:
                rate = state.level / max(state.workers, 1)
                self.clock = ArrivalClock(
                    rate,
                    t0 + ctx.worker / state.level,
                    (state.seed, ctx.worker, state.step),
                    load.arrival,
                    load.burstiness,
                )
            self.clock_key = key
        board = self.context.board
        arrival = self.clock.arrival()
        if arrival is None:  # the trace's records of this step are all sent
            board.changed.wait(timeout=IDLE_WAIT_S)
            return
        seq, t_intended = arrival
        if not board.wait_until(key, t_intended):
            return  # a new step starts its own clock; this arrival belonged to the old one
        state = board.state
        # Every arrival takes its number, sent or dropped: request k is the k-th arrival in every variant, so a
        # drop in one variant does not shift the pairs of every later request. A trace's record is its number; an
        # arrival of conversations is conversation k, whose turn t is request k * turns + t - 1.
        number = self.context.next_index(state) if seq is None else seq
        conversation = self.context.load.conversation
        if conversation is not None and not self.inflight.full():
            self.inflight.spawn(converse, self, state, number, t_intended)
            return
        record = self.new_record(state, t_intended)
        record.seq = number
        if conversation is not None:
            record.conversation, record.turn, record.seq = number, 1, number * conversation.turns
            record.turns = self.context.workload(state.base_url).conversations.turns(self.context.worker, number)
        if self.inflight.full():
            if self.context.load.at_max_inflight == "hold" and conversation is None:
                self.holding.spawn(self.hold, state, record)
                return
            record.error_class = ErrorClass.DROPPED
            record.error_message = f"{self.context.load.max_inflight} requests already in flight; arrival not sent"
            self.emit(record)
            return
        self.inflight.spawn(self.send, state, record)

    def hold(self, state: StepState, record: RequestRecord) -> None:
        """Wait for a slot (the pool's semaphore serves its waiters in order), then send."""
        try:
            self.inflight.spawn(self.send_held, state, record)
        except gevent.GreenletExit:
            record.error_class = ErrorClass.CANCELLED
            record.error_message = "held at max_inflight; the load stopped before a slot freed"
            self.emit(record)
            raise

    def send_held(self, state: StepState, record: RequestRecord) -> None:
        record.t_slot = now()
        self.send(state, record)

    def on_stop(self) -> None:
        deadline = time.monotonic() + (self.environment.stop_timeout or 0)
        self.holding.join(timeout=max(deadline - time.monotonic(), 0))  # held arrivals get their slots first
        self.inflight.join(timeout=max(deadline - time.monotonic(), 0))
        self.holding.kill()
        self.inflight.kill()
        super().on_stop()
