"""The experiment on the master: variants over the ladder, with servers started and stopped.

Variants run one after the other, or interleaved per level in ABBA blocks (``load.order``, ``runtime.ladder``), or
one level is soaked (``runtime.soak``); these programs reach the experiment only through ``runtime.conductor``, which
``Experiment`` implements. ``Experiment.program()`` is a generator the load shape advances once per tick; each value
is Locust's ``(users, spawn_rate, user_classes)``. Blocking work (starting a server) happens inside it, on the
shape's greenlet, while Locust keeps serving heartbeats. When the run stops,
``finish()`` writes the records and hands the run directory to ``pipeline.finish_run``.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
from locust.runners import MasterRunner

from ..analysis.cycles import MIN_CYCLES_PER_USER, Batches
from ..analysis.steady import STEADY, batch_drift
from ..client import ledger
from ..client.engines import cache_extra
from ..pipeline import Outcome, finish_run
from ..records import Phase, now
from ..rundir import RunDir, layout
from ..rundir.env import ClientEnv, HostEnv, RunEnv, ServerRequests, WorkloadEnv
from ..rundir.events import (
    ClientRefused,
    ContextTooLong,
    DrainTimeout,
    Interrupted,
    RecordsLost,
    RecordsMissing,
    ServerStartFailed,
    UsageSuspect,
    WorkerJoined,
    WorkerLost,
)
from ..rundir.facts import host_info, package_versions
from ..rundir.lock import RunLock
from ..rundir.steps import StepRow
from ..workload.generate import PREFIX_BITS
from .clocksync import ClockSync, write_clocks
from .conductor import Tick
from .hostmon import HostMonitor
from .ladder import interleaved, sequential
from .plan import Block, Plan, plan_blocks
from .probes import Faults
from .recorder import CLIENT_SCHEMA, Recorder
from .scale_out import scale_out_all, scale_out_steps
from .session import ServerError, ServerSession
from .soak import soak_program, soak_progress
from .steps import STEP_MESSAGE, StepState
from .workers import WorkerWatch

log = logging.getLogger(__name__)

__all__ = ["Experiment"]

DRAIN_GRACE_S = 30.0
WORKLOAD_WAIT_S = 300.0  # the longest a step waits for the load processes to build their prompts
WORKLOAD_PROGRESS_S = 10.0  # how often that wait is said while it lasts


# After SIGTERM or Ctrl-C, streams in flight get this long to finish before they are cancelled (and recorded
# as such): job runners send SIGKILL a few seconds after SIGTERM.
INTERRUPT_GRACE_S = 5.0


class Experiment:
    def __init__(
        self,
        environment,
        plan: Plan,
        user_classes: dict[str, type],
        session: Callable[[Plan, RunDir], ServerSession] = ServerSession,
        clocks: ClockSync | None = None,
        lock: RunLock | None = None,
    ):
        self.environment = environment
        self.lock = lock  # the run directory's one writer: released once everything is written
        self.plan = plan
        self.run = RunDir(plan.report_dir, plan.run_id)
        self.recorder = Recorder(self.run.path, clock_offsets=clocks.offsets if clocks is not None else dict)
        # Cold across runs: a nonce of this run's own in every marker (0: the same bytes as every run with 0).
        self.nonce = 0 if plan.load.same_prompts_every_run else secrets.randbits(PREFIX_BITS) or 1
        self.state = StepState(run_id=plan.run_id, mode=plan.load.mode, seed=plan.load.seed, nonce=self.nonce)
        self.finished = False
        self.closed = False
        self.interrupted = False
        self.outcome: Outcome | None = None
        self.analysed: tuple | None = None  # (records, run events) the last summary was computed from
        self.run.env = RunEnv(
            run_id=plan.run_id,
            scenario=plan.scenario.model_dump(mode="json"),
            scenario_file=str(plan.scenario.source),
            load=plan.load.model_dump(mode="json"),
            gates=plan.gates.model_dump(mode="json"),
            variants=plan.variants,
            baseline=plan.scenario.baseline_variant,
            options=plan.options,
            external_url=plan.external_url,
            servers={},
            host=HostEnv.model_validate(host_info()),
            # The load processes' own priority, beside each launched server's (servers.<variant>.nice).
            client=ClientEnv(packages=package_versions(), nice=os.getpriority(os.PRIO_PROCESS, 0)),
            seed=plan.load.seed,
            scale_out=plan.scale_out,
            checks_skipped=plan.skipped,
        )
        for why in plan.skipped.values():
            log.info(why)
        self.run.write_env()
        self.run.write_steps()
        ledger.reset()  # this run's requests to its servers, counted from here
        if isinstance(environment.runner, MasterRunner):  # a load process in this one watches its own streams too
            ledger.watch(lambda: (self.state.variant, self.state.step) if self.state.active else None)
        self.session = session(plan, self.run)
        self.session.nonce = self.nonce
        self.classes = [user_classes[plan.load.mode]]
        # What else the machine does while we measure; our own processes (servers, workers, a --host server on this
        # machine) are left out.
        self.host = HostMonitor(lambda: self.recorder.worker_pids() | self.session.local_pids)
        self.host.start()
        self.too_long: set[int] = set()  # context lengths a server cannot hold: never measured
        self.warnings: list[dict] = []
        self.warned: set = set()
        # (variant, step) -> its throughput batches as they stood when its window closed (live: the sweeps' early stop
        # and the live chart's intervals; the report recomputes them from the run directory).
        self.throughput: dict[tuple[str, int], Batches] = {}
        self.clocks = clocks
        self.t_begin = now()
        self.workers = WorkerWatch(environment.runner)
        self.ready: dict[str, set[int]] = {}  # base URL -> load processes whose workload for it is built
        self.faults = Faults(self)  # the probe suite after each ladder, faults while a step holds its level

    def interrupt(self, signal_name: str) -> None:
        """SIGTERM or Ctrl-C: stop sending, let streams finish briefly, then write everything as usual."""
        if self.interrupted:
            return
        self.interrupted = True
        self.session.interrupt()
        self.environment.stop_timeout = min(self.environment.stop_timeout or INTERRUPT_GRACE_S, INTERRUPT_GRACE_S)
        cut = self.cut_window()
        log.warning(
            "%s: stopping the run%s; what was measured until now is kept and reported",
            signal_name,
            f" ({cut})" if cut else "",
        )
        self.run.note(Interrupted(signal=signal_name, step=self.state.step, variant=self.state.variant, cut=cut))

    def cut_window(self) -> str | None:
        """The window an interruption cuts short, in words; None between windows."""
        row = self.run.steps[-1] if self.run.steps else None
        if row is None or not math.isnan(row.t_end):
            return None
        t = now()
        if math.isnan(row.t_steady) or t < row.t_steady:
            return f"warm-up of {row.variant} step {row.step}, before its steady window"
        return (
            f"steady window of {row.variant} step {row.step} cut at {t - row.t_steady:.1f} s of "
            f"{self.plan.steady_s(row.level):g} s"
        )

    # -- load shape program ---------------------------------------------------------------
    def program(self) -> Iterator[Tick]:
        if self.plan.soak is not None:
            yield from soak_program(self)
        elif self.plan.load.interleaved and len(self.plan.variants) > 1:
            yield from interleaved(self)
            yield from scale_out_all(self)
            yield from self.faults.probe_all()
        else:
            yield from sequential(self)
        self.session.stop_all()
        self.broadcast(self.state.variant, self.state.step, self.state.level, Phase.IDLE)

    def blocks(self) -> list[Block]:
        return plan_blocks(self.plan.load, self.too_long)

    def bring_up(self, variant: str, check: bool = True) -> bool:
        """Start the variant's server and ask it the consistency prompts; False when it would not start."""
        try:
            self.session.start(variant)
        except ServerError as exc:
            log.error("variant %s: %s", variant, exc)
            self.run.note(ServerStartFailed(variant=variant, error=str(exc)))
            return False
        self.broadcast(variant, -1, math.nan, Phase.STARTING)
        self.check_context(variant)
        workload = self.session.check_consistency(variant) if check else None
        if workload is not None and self.run.env.workload is None:
            cold = workload.lead.mode == "cold"
            self.run.env.workload = WorkloadEnv(
                **workload.describe(),
                cache_salt=cold and bool(cache_extra(self.plan.engine, "")),
                across_runs="unique" if self.nonce and workload.lead.prefixer else "repeated",
            )
            self.run.write_env()
        return True

    def check_context(self, variant: str) -> None:
        """Context lengths whose prompt and output do not fit the server's context are left out, and said so."""
        size = self.run.env.server(variant).context_size
        max_tokens = self.plan.load.max_tokens
        for n in self.plan.load.context_tokens:
            if size and n + max_tokens > size and n not in self.too_long:
                self.too_long.add(n)
                log.error(
                    "context length %d + %d output tokens does not fit the %s server's %d-token context; "
                    "not measured (raise the server's context, e.g. llama.cpp -c / -np)",
                    n,
                    max_tokens,
                    variant,
                    size,
                )
                self.run.note(ContextTooLong(variant=variant, context=n, max_tokens=max_tokens, server_context=size))

    def measure(self, variant: str, block: Block, urls: list[str] | None = None) -> Iterator[Tick]:
        """One step: warm-up, steady window, extensions while it drifts or has seen too few requests. ``urls``: the
        servers of a scale-out step, sent to round-robin (``runtime.scale_out``)."""
        load = self.plan.load
        step, level, context = block.step, block.level, block.context
        users = self.users_for(level)
        tick = self.tick(users)
        yield from self.settle(tick)
        yield from self.await_workloads(variant, tick)
        row = StepRow(
            variant=variant,
            step=step,
            level=level,
            mode=load.mode,
            users=users,
            context=context or None,
            t_start=now(),
            t_steady=math.nan,
            t_end=math.nan,
        )
        if urls:
            row.servers, row.server_level, row.pair = len(urls), level / len(urls), block.repeat
        self.run.steps.append(row)
        self.run.write_steps()  # a run killed now can still be analysed up to here
        sent_to = tuple(urls or ())
        assert self.session.server is not None  # the step's variant was brought up or activated
        self.session.prime(list(sent_to) or [self.session.server.base_url])  # shared prefixes into the cache
        self.broadcast(variant, step, level, Phase.WARMUP, t_start=row.t_start, context=context, base_urls=sent_to)
        self.announce(variant, level, context, len(sent_to))
        yield from self.hold(row.t_start + load.warmup_s, tick)
        if self.interrupted:
            row.t_end = now()  # no steady window: the step is shown as not measured
            self.run.write_steps()
            return
        row.t_steady = now()
        self.run.write_steps()
        self.recorder.live.collect(variant, step)
        self.broadcast(variant, step, level, Phase.STEADY, t_start=row.t_start, context=context, base_urls=sent_to)
        yield from self.hold(row.t_steady + self.plan.steady_s(level), tick)
        row.extended_s = 0.0
        while row.extended_s < load.max_extend_s and not self.interrupted and self.session.alive():
            why = self.short_of(variant, step, users) or (
                "" if self.looks_steady(variant, row) else "throughput still drifting"
            )
            if not why:
                break
            extra = min(load.step_duration_s / 2, load.max_extend_s - row.extended_s)
            log.info("variant %s level %g: %s; extending the step by %gs", variant, level, why, extra)
            self.warn(
                "step_extended",
                f"{variant} at level {level:g}: {why}; step extended by {extra:g} s",
                key=(variant, step, row.extended_s),
            )
            row.extended_s += extra
            yield from self.hold(now() + extra, tick)
        row.t_end = now()
        self.run.write_steps()
        self.throughput[(variant, step)] = self.recorder.live.step_batches(variant, step, row.t_steady, row.t_end)
        self.recorder.live.forget(variant, step)

    def await_workloads(self, variant: str, tick: Tick) -> Iterator[Tick]:
        """Before a server's first step, wait until every load process has built its prompts for it (the server's
        tokenizer counts each word of the generator's vocabulary, some 500 calls; a trace's blocks), so that the
        step's clock does not start while they still do: a closed loop's users would send nothing in its first
        seconds, an open loop's arrivals would go late."""
        url = self.session.server.base_url if self.session.server else ""

        def built() -> bool:
            return len(self.ready.get(url, ())) >= max(self.worker_count(), 1)

        if not url or built():
            return
        started = now()
        said = started
        self.broadcast(variant, -1, math.nan, Phase.STARTING)  # the load processes start building
        while not built():
            waited = now() - started
            if waited > WORKLOAD_WAIT_S or self.interrupted or not self.session.alive():
                why = (
                    "the run was stopped"
                    if self.interrupted
                    else "the server is gone"
                    if not self.session.alive()
                    else f"the limit is {WORKLOAD_WAIT_S:g} s"
                )
                log.warning(
                    "variant %s: waiting for prompts: %d of %d load processes ready after %.0f s (%s)",
                    variant,
                    len(self.ready.get(url, ())),
                    max(self.worker_count(), 1),
                    waited,
                    why,
                )
                return
            if now() - said >= WORKLOAD_PROGRESS_S:
                said = now()
                log.info(
                    "variant %s: waiting for prompts: %d of %d load processes ready, %.0f s",
                    variant,
                    len(self.ready.get(url, ())),
                    max(self.worker_count(), 1),
                    waited,
                )
            self.send_state()
            yield tick

    def short_of(self, variant: str, step: int, users: int) -> str:
        """Why the steady window has too few completed requests (or tokens) so far; empty when it has enough.
        In a closed loop the streams in flight were sent in the window and will count too."""
        load = self.plan.load
        done, tokens = self.recorder.progress(variant, step)
        in_flight = users if load.mode == "closed" else 0
        # Closed loop: an interval needs MIN_BATCHES batches of 2 request cycles per user (``analysis.cycles``).
        needed = max(load.min_requests, MIN_CYCLES_PER_USER * users) if load.mode == "closed" else load.min_requests
        if done + in_flight >= needed and tokens >= load.min_output_tokens:
            return ""
        return f"{done} requests ({tokens} output tokens) completed so far, {needed} ({load.min_output_tokens}) needed"

    def looks_steady(self, variant: str, row: StepRow) -> bool:
        """Closed loop: drift of the throughput over the request cycles completed since the steady window began, by
        the analysis's own test (``steady.batch_drift``); a window too short for it is judged by ``short_of``. An open
        loop's throughput follows its arrivals; its steadiness is judged on latency and in-flight afterwards."""
        if self.plan.load.mode == "open":
            return True
        end = now()
        check = batch_drift(self.recorder.live.step_batches(variant, row.step, row.t_steady, end), row.t_steady, end)
        # Too noisy to tell is not steady: a longer window can tell.
        return check is None or check["status"] in (STEADY, None)

    def progress(self) -> dict:
        """Where the run is: the step in progress (or the last one), its phase, and the time left in the step
        and, roughly, in the run (planned steps at their nominal length; server starts not counted)."""
        if self.plan.soak is not None:
            return soak_progress(self)
        load = self.plan.load
        total = (len(self.blocks()) + scale_out_steps(self)) * len(self.plan.variants)
        row = self.run.steps[-1] if self.run.steps else None
        step_left = 0.0
        if row is not None and math.isnan(row.t_end):
            steady_from = row.t_steady if math.isfinite(row.t_steady) else row.t_start + load.warmup_s
            steady = self.plan.steady_s(row.level)
            step_left = max(steady_from + steady + (row.extended_s or 0.0) - now(), 0.0)
        steps_left = max(total - len(self.run.steps), 0)
        return {
            "variant": self.state.variant,
            "level": self.state.level,
            "context": self.state.context,
            "phase": self.state.phase,
            "mode": load.mode,
            "step": len(self.run.steps),
            "steps": total,
            "step_left_s": round(step_left, 1),
            "extended_s": (row.extended_s if row is not None else None) or 0.0,
            "run_left_s": round(step_left + steps_left * (load.warmup_s + load.step_duration_s), 1),
            "finished": self.finished,
            "interrupted": self.interrupted,
        }

    def warn(self, kind: str, text: str, key: object = None) -> None:
        """A warning for the web UI as it happens (once per ``key``); run events stay in steps.json."""
        key = (kind, key if key is not None else text)
        if key not in self.warned:
            self.warned.add(key)
            self.warnings.append({"t": now(), "kind": kind, "text": text})

    def announce(self, variant: str, level: float, context: int, servers: int = 0) -> None:
        """Headless progress: where the run is and roughly how long it has left (server starts not counted)."""
        load = self.plan.load
        progress = self.progress()
        unit = "req/s" if load.mode == "open" else "users"
        where = f", {context}-token prompts" if context else ""
        where += f", spread over {servers} servers" if servers > 1 else ", one server of a scale-out" if servers else ""
        where += f", the trace at {level / self.plan.trace.rate:g}x its speed" if self.plan.trace else ""
        log.info(
            "variant %s, level %g %s%s (step %d/%d of the run): warm-up %gs + steady %gs; about %ds left",
            variant,
            level,
            unit,
            where,
            progress["step"],
            progress["steps"],
            load.warmup_s,
            self.plan.steady_s(level),
            progress["run_left_s"],
        )

    def hold(self, until: float, tick: Tick) -> Iterator[Tick]:
        while now() < until:
            if not self.session.alive() or self.interrupted:
                return
            until += self.faults.tick(self.run.steps[-1])
            self.send_state()
            yield tick

    def settle(self, tick: Tick) -> Iterator[Tick]:
        """Before a step with fewer users, stop the surplus ones: nobody sends (the previous step drains, its
        streams finish and keep its label) until only the new step's users are left."""
        users = tick[0]
        if self.environment.runner.user_count <= users:
            return
        self.broadcast(self.state.variant, self.state.step, self.state.level, Phase.DRAIN)
        grace = INTERRUPT_GRACE_S if self.interrupted else DRAIN_GRACE_S
        deadline = now() + (self.environment.stop_timeout or 0) + grace
        while self.environment.runner.user_count > users and now() < deadline:
            self.send_state()
            yield tick

    def drain(self) -> Iterator[Tick]:
        """Zero users; wait until every stream in flight has ended and its record has arrived (a SIGTERM meanwhile
        shortens the grace at once)."""
        streams_end_by = now() + (self.environment.stop_timeout or 0)
        while now() < streams_end_by + (INTERRUPT_GRACE_S if self.interrupted else DRAIN_GRACE_S):
            self.send_state()
            yield self.idle_tick()
            if self.environment.runner.user_count == 0 and self.recorder.drained():
                return
        log.warning("drain timed out; records missing per worker: %s", self.recorder.missing())
        missing = self.recorder.missing()
        self.run.note(DrainTimeout(missing={str(worker): n for worker, n in missing.items()}))

    def tick(self, users: int) -> Tick:
        """The tick that holds ``users`` users, reached at once (the spawn rate covers every user to start or stop)."""
        return (users, max(users, self.environment.runner.user_count, 1), self.classes)

    def idle_tick(self) -> Tick:
        return (0, 100, self.classes)

    def checkpoint(self) -> None:
        """Steps, host and client samples on disk, telemetry parts flushed: a run killed now is reported up to here."""
        self.run.write_steps()
        try:
            layout.write_parquet(self.run.file(layout.HOST), self.host.table())
            layout.write_parquet(
                self.run.file(layout.CLIENT), pa.Table.from_pylist(self.recorder.client_samples, schema=CLIENT_SCHEMA)
            )
        except OSError as exc:  # a full disk must not end the run: both are kept in memory and written at its end
            log.warning(
                "could not write the host and client samples (%s); written at the run's end", exc.strerror or exc
            )
        self.session.telemetry.flush()

    def users_for(self, level: float) -> int:
        if self.plan.load.mode == "open":
            # One dispatcher per load-generating process; each sends level / workers req/s.
            return max(self.worker_count(), 1)
        return max(int(round(level)), 1)

    def worker_count(self) -> int:
        runner = self.environment.runner
        return runner.worker_count if isinstance(runner, MasterRunner) else 1

    # -- step state -----------------------------------------------------------------------
    def broadcast(
        self,
        variant: str,
        step: int,
        level: float,
        phase: str,
        t_start: float = math.nan,
        context: int = 0,
        base_urls: tuple = (),
    ) -> None:
        server = self.session.server
        self.state = StepState(
            run_id=self.plan.run_id,
            variant=variant,
            step=step,
            level=level,
            phase=phase,
            mode=self.plan.load.mode,
            base_url=server.base_url if server else "",
            model=server.model if server else "",
            workers=max(self.worker_count(), 1),
            seed=self.plan.load.seed,
            nonce=self.nonce,
            t_start=t_start,
            context=context,
            base_urls=base_urls,
        )
        self.send_state()

    def send_state(self) -> None:
        # Sent every tick, so a worker that joins late still learns the current step.
        self.watch_workers()
        self.watch_refusals()
        offsets = self.clocks.offsets() if self.clocks is not None else {}
        self.environment.runner.send_message(STEP_MESSAGE, {**self.state.to_dict(), "clock_offsets": offsets})

    def watch_refusals(self) -> None:
        """A load process that cannot build a request (an input the start's checks did not catch) sends nothing:
        the run stops with exit 2 and says why, once, instead of counting a failure per attempt."""
        for worker, tally in self.recorder.tally.items():
            for message in tally.refused:
                if ("client_refused", worker, message) in self.warned:
                    continue
                self.warned.add(("client_refused", worker, message))
                log.error("load process %d cannot build a request (nothing sent); stopping: %s", worker, message)
                self.run.note(ClientRefused(worker=worker, message=message))
                self.interrupted = True

    def moment(self) -> str:
        """Where the run is, in words: a step, or the set-up before a variant's first step (never "step -1")."""
        state = self.state
        if state.step >= 0:
            return f"during {state.variant} step {state.step}"
        if state.variant:
            return f"while variant {state.variant} was being set up (its server, then the load processes' prompts)"
        return "before the first step"

    def watch_workers(self, missing_only: bool = False) -> None:
        """A lost worker: a run event with what it had sent, its step marked (the level was not held), and the
        run stopped unless ``load.on_worker_loss`` is ``continue``. A worker that joins gets the load again."""
        lost, joined = self.workers.check(missing_only)
        for change in lost:
            tally = self.recorder.tally.get(change.index)
            row = self.run.steps[-1] if self.run.steps and math.isnan(self.run.steps[-1].t_end) else None
            if row is not None:
                row.workers_lost = [*(row.workers_lost or []), change.index]
            stop = self.plan.load.on_worker_loss == "stop"
            self.recorder.lost.add(change.index)
            log.error(
                "worker %d (%s) stopped answering %s, %d of its requests in flight or not shipped are lost; %s",
                change.index,
                change.client_id,
                self.moment(),
                self.recorder.unaccounted(change.index),
                "stopping the run (load.on_worker_loss: stop)"
                if stop
                else "going on with the others (load.on_worker_loss: continue)",
            )
            self.run.note(
                WorkerLost(
                    worker=change.index,
                    client_id=change.client_id,
                    variant=self.state.variant,
                    step=self.state.step,
                    level=self.state.level,
                    records_sent=tally.sent_total if tally else 0,
                    records_received=tally.received if tally else 0,
                    requests_lost=self.recorder.unaccounted(change.index),
                    stopped=stop,
                )
            )
            if stop:
                self.interrupted = True
        for change in joined:
            log.info("worker %d (%s) joined %s", change.index, change.client_id, self.moment())
            self.run.note(
                WorkerJoined(
                    worker=change.index, client_id=change.client_id, variant=self.state.variant, step=self.state.step
                )
            )
        if joined:
            self.environment.runner.shape_last_tick = None  # the next tick dispatches the users again, to all

    # -- end ------------------------------------------------------------------------------
    def finish(self, final: bool) -> Path:
        """Stop what runs, write the records, and run the post-run pipeline; safe to call more than once."""
        self.finished = True
        if self.closed:
            return self.run.path
        self.closed = final
        self.watch_workers(missing_only=True)  # Locust stops the test itself when its last worker goes missing
        self.session.stop_all()
        self.session.telemetry.flush()  # stopping took a last sample (and a backfill): the analysis must see it
        for row in self.run.steps:
            if math.isnan(row.t_end):
                row.t_end = now()
        missing = self.recorder.missing()
        if missing:
            # JSON's keys are strings: the worker indices are written as the file will read them back.
            self.run.note(RecordsMissing(missing={str(worker): n for worker, n in missing.items()}))
        for event in self.run.events:  # records of a lost worker that came back late are rows, not lost
            if isinstance(event, WorkerLost):
                event.requests_lost = self.recorder.unaccounted(event.worker)
        if self.recorder.suspect:  # the usage checks made after their records were sent amend them (rundir.load)
            checked = next((e for e in self.run.events if isinstance(e, UsageSuspect)), None)
            if checked is None:
                self.run.note(UsageSuspect(requests=dict(self.recorder.suspect)))
            else:
                checked.requests = dict(self.recorder.suspect)
        self.run.write_steps()
        counted = self.recorder.server_requests(ledger.snapshot())
        self.run.env.server_requests = [ServerRequests(**r) for r in counted["requests"]]
        self.run.env.server_seen = counted["seen"]
        self.run.write_env()
        self.host.stop()
        if final:
            self.recorder.close()
            self.session.close()
        else:
            self.recorder.finalize()
        layout.write_parquet(self.run.file(layout.HOST), self.host.table())
        if self.clocks is not None:
            write_clocks(self.run, self.clocks.samples, since=self.t_begin)
        parts = self.recorder.parts
        if parts.rows_lost and not any(isinstance(e, RecordsLost) for e in self.run.events):
            log.error("%d records could not be written: %s", parts.rows_lost, "; ".join(parts.loss_reasons))
            self.run.note(RecordsLost(lost=parts.rows_lost, reasons=parts.loss_reasons))
        analysed = (self.recorder.rows_written, len(self.run.events))
        if analysed != self.analysed:  # headless runs stop, then quit: nothing new arrived in between
            self.analysed = analysed
            self.run.write_all()  # a write skipped by a full disk during the run: the analysis reads these files
            self.outcome = finish_run(self.run.path, gates=self.plan.gates)
        if final and self.lock is not None:
            self.lock.release()
        return self.run.path
