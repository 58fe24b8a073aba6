"""The experiment on the master: variants in sequence, each over the ladder, with servers started and stopped.

``Experiment.program()`` is a generator the load shape advances once per tick; each value is
Locust's ``(users, spawn_rate, user_classes)``. Blocking work (starting a server) happens inside
it, on the shape's greenlet, while Locust keeps serving heartbeats. When the run stops,
``finish()`` writes the records and hands the run directory to ``pipeline.finish_run``.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from locust.runners import MasterRunner

from ..analysis.steady import drift
from ..pipeline import Outcome, finish_run
from ..records import Phase, now
from ..rundir import RunDir
from ..rundir.facts import host_info, package_versions
from .plan import Plan
from .recorder import Recorder
from .session import ServerError, ServerSession
from .steps import STEP_MESSAGE, StepState

log = logging.getLogger(__name__)

__all__ = ["Experiment"]

DRAIN_GRACE_S = 30.0
# After SIGTERM or Ctrl-C, streams in flight get this long to finish before they are cancelled (and recorded
# as such): job runners send SIGKILL a few seconds after SIGTERM.
INTERRUPT_GRACE_S = 5.0


class Experiment:
    def __init__(self, environment, plan: Plan, user_classes: dict[str, type],
                 session: Callable[[Plan, RunDir], ServerSession] = ServerSession):
        self.environment = environment
        self.plan = plan
        self.user_classes = user_classes
        self.run = RunDir(plan.report_dir, plan.run_id)
        self.recorder = Recorder(self.run.path)
        self.state = StepState(run_id=plan.run_id, mode=plan.load.mode, seed=plan.load.seed)
        self.finished = False
        self.closed = False
        self.interrupted = False
        self.outcome: Outcome | None = None
        self.analysed: tuple | None = None  # (records, run events) the last summary was computed from
        self.run.env = {
            "run_id": plan.run_id, "scenario": plan.scenario.model_dump(mode="json"),
            "scenario_file": str(plan.scenario.source), "load": plan.load.model_dump(mode="json"),
            "gates": plan.gates.model_dump(mode="json"), "variants": plan.variants,
            "baseline": plan.scenario.baseline_variant, "options": plan.options,
            "external_url": plan.external_url, "servers": {}, "host": host_info(),
            "client": {"packages": package_versions()}, "seed": plan.load.seed,
        }
        self.run.write_env()
        self.run.write_steps()
        self.session = session(plan, self.run)

    def interrupt(self, signal_name: str) -> None:
        """SIGTERM or Ctrl-C: stop sending, let streams finish briefly, then write everything as usual."""
        if self.interrupted:
            return
        self.interrupted = True
        self.environment.stop_timeout = min(self.environment.stop_timeout or INTERRUPT_GRACE_S, INTERRUPT_GRACE_S)
        log.warning("%s: stopping the run; what was measured until now is kept and reported", signal_name)
        self.run.note("interrupted", signal=signal_name, step=self.state.step, variant=self.state.variant)

    # -- load shape program ---------------------------------------------------------------
    def program(self) -> Iterator[tuple]:
        load = self.plan.load
        for variant in self.plan.variants:
            if self.interrupted:
                break
            try:
                self.session.start(variant)
            except ServerError as exc:
                log.error("variant %s: %s", variant, exc)
                self.run.note("server_start_failed", variant=variant, error=str(exc))
                continue
            self.broadcast(variant, -1, math.nan, Phase.STARTING)
            workload = self.session.check_consistency(variant)
            if workload is not None and "workload" not in self.run.env:
                self.run.env["workload"] = workload.describe()
                self.run.write_env()
            classes = [self.user_classes[load.mode]]
            for step, level in enumerate(self.levels()):
                users = self.users_for(level)
                tick = (users, max(users, self.environment.runner.user_count, 1), classes)
                yield from self.settle(tick)
                row = {"variant": variant, "step": step, "level": level, "mode": load.mode, "users": users,
                       "t_start": now(), "t_steady": math.nan, "t_end": math.nan}
                self.run.steps.append(row)
                self.run.write_steps()  # a run killed now can still be analysed up to here
                self.broadcast(variant, step, level, Phase.WARMUP, t_start=row["t_start"])
                self.announce(variant, step, level)
                yield from self.hold(row["t_start"] + load.warmup_s, tick)
                if self.interrupted:
                    row["t_end"] = now()  # no steady window: the step is shown as not measured
                    self.run.write_steps()
                    break
                row["t_steady"] = now()
                self.run.write_steps()
                self.broadcast(variant, step, level, Phase.STEADY, t_start=row["t_start"])
                yield from self.hold(row["t_steady"] + load.step_duration_s, tick)
                row["extended_s"] = 0.0
                while (row["extended_s"] < load.max_extend_s and not self.interrupted
                       and not self.looks_steady(variant, level, row)):
                    extra = min(load.step_duration_s / 2, load.max_extend_s - row["extended_s"])
                    log.info("variant %s level %g: throughput still drifting; extending the step by %gs",
                             variant, level, extra)
                    row["extended_s"] += extra
                    yield from self.hold(now() + extra, tick)
                row["t_end"] = now()
                self.run.write_steps()
                if not self.session.alive() or self.interrupted:
                    break
            self.broadcast(variant, self.state.step, self.state.level, Phase.DRAIN)
            yield from self.drain(classes)
            self.session.stop()
        self.broadcast(self.state.variant, self.state.step, self.state.level, Phase.IDLE)

    def levels(self) -> list[float]:
        return list(self.plan.load.ladder) * self.plan.load.repeats

    def looks_steady(self, variant: str, level: float, row: dict) -> bool:
        """Drift of completed tokens per second since the steady window began, from the live figures."""
        rates = self.recorder.live.token_rates(variant, level, row["t_steady"], now())
        if rates.size < 3:
            return True
        return drift(row["t_steady"] + np.arange(rates.size) + 0.5, rates)["steady"] is not False

    def announce(self, variant: str, step: int, level: float) -> None:
        """Headless progress: where the run is and roughly how long it has left (server starts not counted)."""
        load = self.plan.load
        per_step = load.warmup_s + load.step_duration_s
        count = len(self.levels())
        position = self.plan.variants.index(variant)
        steps_left = (count - step) + count * (len(self.plan.variants) - position - 1)
        unit = "req/s" if load.mode == "open" else "users"
        log.info("variant %s (%d/%d), level %g %s (step %d/%d): warm-up %gs + steady %gs; about %ds left",
                 variant, position + 1, len(self.plan.variants), level, unit, step + 1, count, load.warmup_s,
                 load.step_duration_s, steps_left * per_step)

    def hold(self, until: float, tick: tuple) -> Iterator[tuple]:
        while now() < until:
            if not self.session.alive() or self.interrupted:
                return
            self.send_state()
            yield tick

    def settle(self, tick: tuple) -> Iterator[tuple]:
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

    def drain(self, classes: list[type]) -> Iterator[tuple]:
        """Zero users; wait until every stream in flight has ended and its record has arrived."""
        grace = INTERRUPT_GRACE_S if self.interrupted else DRAIN_GRACE_S
        deadline = now() + (self.environment.stop_timeout or 0) + grace
        while now() < deadline:
            self.send_state()
            yield (0, 100, classes)
            if self.environment.runner.user_count == 0 and self.recorder.drained():
                return
        log.warning("drain timed out; records missing per worker: %s", self.recorder.missing())
        self.run.note("drain_timeout", missing=self.recorder.missing())

    def users_for(self, level: float) -> int:
        if self.plan.load.mode == "open":
            # One dispatcher per load-generating process; each sends level / workers req/s.
            return max(self.worker_count(), 1)
        return max(int(round(level)), 1)

    def worker_count(self) -> int:
        runner = self.environment.runner
        return runner.worker_count if isinstance(runner, MasterRunner) else 1

    # -- step state -----------------------------------------------------------------------
    def broadcast(self, variant: str, step: int, level: float, phase: str, t_start: float = math.nan) -> None:
        server = self.session.server
        self.state = StepState(run_id=self.plan.run_id, variant=variant, step=step, level=level, phase=phase,
                               mode=self.plan.load.mode, base_url=server.base_url if server else "",
                               model=server.model if server else "", workers=max(self.worker_count(), 1),
                               seed=self.plan.load.seed, t_start=t_start)
        self.send_state()

    def send_state(self) -> None:
        # Sent every tick, so a worker that joins late still learns the current step.
        self.environment.runner.send_message(STEP_MESSAGE, self.state.to_dict())

    # -- end ------------------------------------------------------------------------------
    def finish(self, final: bool) -> Path:
        """Stop what runs, write the records, and run the post-run pipeline; safe to call more than once."""
        self.finished = True
        if self.closed:
            return self.run.path
        self.closed = final
        self.session.stop()
        for row in self.run.steps:
            if math.isnan(row["t_end"]):
                row["t_end"] = now()
        missing = self.recorder.missing()
        if missing:
            self.run.note("records_missing", missing=missing)
        self.run.write_steps()
        if final:
            self.recorder.close()
            self.session.close()
        else:
            self.recorder.finalize()
        parts = self.recorder.parts
        if parts.rows_lost and not any(e["kind"] == "records_lost" for e in self.run.events):
            log.error("%d records could not be written: %s", parts.rows_lost, "; ".join(parts.loss_reasons))
            self.run.note("records_lost", lost=parts.rows_lost, reasons=parts.loss_reasons)
        analysed = (self.recorder.rows_written, len(self.run.events))
        if analysed != self.analysed:  # headless runs stop, then quit: nothing new arrived in between
            self.analysed = analysed
            self.outcome = finish_run(self.run.path, gates=self.plan.gates)
        return self.run.path
