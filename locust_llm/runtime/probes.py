"""Abnormal inputs and faults during a run (the scenario's ``probes:``), on the master.

* The probe suite (``client.probes``) against each variant's server once its ladder is done: after, so that a
  prompt over the context, a burst or a crash cannot change what the ladder measured, and with no load running
  (the users have drained). Servers that stay up together are probed in turn after the last block.
* Faults while the ladder holds a level: in the steps at ``fault_level`` (the highest ladder level by default), one
  fault per step in the order given, at the middle of the step's steady window. ``pause``: SIGSTOP to the launched
  server's process group, SIGCONT ``pause_s`` later. ``restart``: stop the server and start the same variant, on
  the same port when it is free (else a new one, which the workers are told); while it is down the users wait
  (a closed-loop user would otherwise send thousands of refused connections a second). The step is marked (its
  status becomes ``fault-injected``, left out of every verdict), a run event says when, and the fault is a row of
  the probe table.

Every result is a ``ProbeResult`` row of ``probes.json``; a server that crashed or stopped answering is a
``probe_server_failed`` (or ``server_restart_failed``) run event, which fails the run with exit code 6.
"""

from __future__ import annotations

import logging
import math
import os
import signal
from collections.abc import Iterator
from urllib.parse import urlsplit

import gevent

from ..client.http import session as http_session
from ..client.probes import Target, recover, run_suite
from ..client.tokenizer import counter_for
from ..records import now
from ..rundir import layout, write_json
from ..rundir.events import (
    FaultsNotInjected,
    ProbeServerFailed,
    ServerPaused,
    ServerRestarted,
    ServerRestartFailed,
    ServerStartFailed,
)
from ..rundir.probes import ProbeResult
from ..rundir.steps import InjectedFault, StepRow
from ..scenario.probes import MAX_BURST
from ..servers import PortInUseError, ServerError
from ..workload import WorkloadError
from .conductor import Conductor, Tick
from .session import ActiveServer

log = logging.getLogger(__name__)

__all__ = ["Faults"]

BURST_TOKENS = 64
WAIT_S = 0.2  # how often a wait looks whether the run was interrupted


class Faults:
    """The probes and faults of one experiment; ``tick`` is called once per tick while a step holds its level."""

    def __init__(self, experiment: Conductor):
        self.experiment = experiment
        plan = experiment.plan
        self.spec = plan.scenario.probes
        self.results: list[ProbeResult] = []
        self.failed: set[str] = set()  # variants whose server failed (one run event each)
        self.level = self.spec.fault_level or max(plan.load.ladder)
        self.pending = list(self.spec.faults)  # faults still to inject, in order
        if self.pending and self.level not in plan.load.ladder:
            log.error("probes.fault_level %g is not a ladder level; no fault is injected", self.level)
            experiment.run.note(
                FaultsNotInjected(
                    fault_level=self.level, ladder=plan.load.ladder, reason="fault_level is not a ladder level"
                )
            )
            self.pending = []

    # -- faults under load ----------------------------------------------------------------------------------------
    def tick(self, row: StepRow) -> float:
        """Inject the next fault once the step at ``fault_level`` reaches the middle of its steady window; returns
        the seconds a restart kept the server down (0 otherwise), by which the window is extended so that it keeps
        the half it was to have after the fault (a pause's length is planned into the window)."""
        if (
            not self.pending
            or row.faults
            or row.context
            or row.servers
            or row.level != self.level
            or not math.isfinite(row.t_steady)
        ):
            return 0.0
        kind = self.pending[0]
        duration = self.experiment.plan.load.step_duration_s
        offset = (duration - self.spec.pause_s) / 2 if kind == "pause" else duration / 2
        if now() < row.t_steady + max(offset, 0.0):
            return 0.0
        server = self.experiment.session.server
        if server is None or server.process is None or server.process.proc is None:
            log.warning("faults need a server locust-llm launched (a process to pause or restart); none injected")
            self.experiment.run.note(
                FaultsNotInjected(
                    faults=self.pending, variant=row.variant, reason="the server was not launched by locust-llm"
                )
            )
            self.pending = []
            return 0.0
        self.pending.pop(0)
        row.faults = []
        self.experiment.warn("fault", f"{kind} of the {server.variant} server in step {row.step} (level {row.level:g})")
        if kind == "pause":
            self.pause(row, server)
            return 0.0
        t_start = now()
        self.restart(row, server)
        return now() - t_start

    def pause(self, row: StepRow, server: ActiveServer) -> None:
        # tick() checked that a process of ours serves it, and opened the step's list of faults
        assert server.process is not None and server.process.proc is not None and row.faults is not None
        pid, pause_s = server.process.proc.pid, self.spec.pause_s
        log.warning("pausing the %s server (SIGSTOP to process group %d) for %g s", server.variant, pid, pause_s)
        t_start = now()
        try:
            os.killpg(pid, signal.SIGSTOP)
            try:
                while (left := t_start + pause_s - now()) > 0 and not self.experiment.interrupted:
                    gevent.sleep(min(WAIT_S, left))
            finally:
                os.killpg(pid, signal.SIGCONT)  # whatever happens meanwhile, the server must not stay stopped
        except ProcessLookupError:
            log.error("the %s server was gone before its pause ended", server.variant)
        t_end = now()
        row.faults.append(InjectedFault(kind="pause", t_start=t_start, t_end=t_end, pause_s=pause_s))
        self.experiment.run.note(
            ServerPaused(
                variant=server.variant,
                step=row.step,
                level=row.level,
                t_start=t_start,
                t_end=t_end,
                pause_s=pause_s,
                pid=pid,
            )
        )
        recovered, recover_ms, why = self.recovery(server, t_end)
        self.add(
            ProbeResult(
                variant=server.variant,
                probe="pause",
                kind="fault",
                step=row.step,
                level=row.level,
                sent=f"SIGSTOP to the server's process group, SIGCONT {pause_s:g} s later, in the middle of step "
                f"{row.step}'s steady window (level {row.level:g})",
                expected="requests in flight wait out the pause and complete; the server answers at once after SIGCONT",
                answer=f"paused {t_end - t_start:.2f} s",
                latency_ms=(t_end - t_start) * 1e3,
                recovered=recovered,
                recover_ms=recover_ms,
                verdict="ok" if recovered else "server-failed",
                note=why,
                t_start=t_start,
                t_end=t_end,
            )
        )

    def restart(self, row: StepRow, server: ActiveServer) -> None:
        assert row.faults is not None  # tick() opened the step's list of faults
        session, variant = self.experiment.session, server.variant
        port = urlsplit(server.base_url).port
        log.warning("restarting the %s server (%s)", variant, server.base_url)
        t_start = now()
        session.stop(variant)
        self.rebroadcast()  # no server: the users wait instead of hammering a closed port
        try:
            try:
                new = session.start(variant, port=port)
            except PortInUseError:  # the old port is still held (sockets in TIME_WAIT): a new one, told to workers
                new = session.start(variant)
        except ServerError as exc:
            t_end = now()
            log.error("the %s server did not come back after its restart: %s", variant, exc)
            row.faults.append(InjectedFault(kind="restart", t_start=t_start, t_end=t_end))
            self.experiment.run.note(ServerRestartFailed(variant=variant, step=row.step, error=str(exc)))
            self.failed.add(variant)  # the event above is its failure: no probe_server_failed on top
            self.experiment.interrupted = True  # nothing left to measure this variant on: end the run (exit 6)
            self.add(self.restart_result(row, variant, t_start, t_end, "no server", False, None, str(exc)))
            return
        t_ready = now()
        self.rebroadcast()
        row.faults.append(InjectedFault(kind="restart", t_start=t_start, t_end=t_ready))
        self.experiment.run.note(
            ServerRestarted(
                variant=variant,
                step=row.step,
                level=row.level,
                t_start=t_start,
                t_end=t_ready,
                down_s=t_ready - t_start,
                old_url=server.base_url,
                new_url=new.base_url,
                same_port=new.base_url == server.base_url,
            )
        )
        recovered, recover_ms, why = self.recovery(new, t_ready)
        recover_ms = recover_ms + (t_ready - t_start) * 1e3 if recover_ms is not None else None
        where = "the same port" if new.base_url == server.base_url else f"a new port ({new.base_url})"
        self.add(
            self.restart_result(
                row,
                variant,
                t_start,
                t_ready,
                f"healthy again on {where} after {t_ready - t_start:.2f} s",
                recovered,
                recover_ms,
                why,
            )
        )

    @staticmethod
    def restart_result(
        row: StepRow,
        variant: str,
        t_start: float,
        t_end: float,
        answer: str,
        recovered: bool,
        recover_ms: float | None,
        note: str | None,
    ) -> ProbeResult:
        return ProbeResult(
            variant=variant,
            probe="restart",
            kind="fault",
            step=row.step,
            level=row.level,
            sent=f"stop the server (SIGTERM) and start it again, in the middle of step {row.step}'s steady window "
            f"(level {row.level:g})",
            expected="streams in flight may fail and connections are refused while it is down; it is healthy again "
            "within its start-up time and answers",
            answer=answer,
            latency_ms=(t_end - t_start) * 1e3,
            recovered=recovered,
            recover_ms=recover_ms,
            verdict="ok" if recovered else "server-failed",
            note=note,
            t_start=t_start,
            t_end=t_end,
        )

    def rebroadcast(self) -> None:
        """The current step again, with the active server's URL (empty while there is none)."""
        state = self.experiment.state
        self.experiment.broadcast(
            state.variant, state.step, state.level, state.phase, t_start=state.t_start, context=state.context
        )

    # -- the probe suite ------------------------------------------------------------------------------------------
    def probe(self, variant: str) -> Iterator[Tick]:
        """The probe suite against ``variant``'s server (up and idle), one probe per tick."""
        experiment = self.experiment
        server = experiment.session.servers.get(variant)
        if not self.spec.enabled or experiment.interrupted or server is None or not self.alive_check(server)():
            return  # a server that died during the ladder is a run event already
        experiment.session.activate(variant)  # telemetry follows the server being probed
        target = self.target(server)
        try:
            target.counter = counter_for(server.base_url, experiment.plan.load.tokenizer)
        except WorkloadError:
            pass  # the probes that need a prompt of an exact length say they were not run
        log.info("probing the %s server at %s", variant, server.base_url)
        suite = run_suite(target)
        while not experiment.interrupted:
            # Each probe in a greenlet of its own: SIGTERM leaves a few seconds, a probe may take minutes.
            job = gevent.spawn(next, suite, None)
            while not job.ready():
                job.join(timeout=WAIT_S)
                if experiment.interrupted:
                    log.warning("interrupted: the probe in flight against %s is abandoned", variant)
                    job.kill()
                    return
            result = job.get()
            if result is None:
                return
            self.add(result)
            experiment.send_state()
            yield experiment.idle_tick()

    def probe_all(self) -> Iterator[Tick]:
        """After interleaved blocks: each variant's server in turn (``interleave: restart`` starts each again)."""
        experiment = self.experiment
        together = bool(experiment.plan.external_url) or experiment.plan.scenario.server.servers_together
        for variant in experiment.plan.variants if self.spec.enabled else ():
            if experiment.interrupted:
                return
            if not together and variant not in experiment.session.servers:
                experiment.session.stop()
                try:
                    experiment.session.start(variant)
                except ServerError as exc:
                    experiment.run.note(ServerStartFailed(variant=variant, error=str(exc), during="probes"))
                    continue
            yield from self.probe(variant)

    def target(self, server: ActiveServer) -> Target:
        plan = self.experiment.plan
        burst = self.spec.burst or min(max(2 * math.ceil(max(plan.load.ladder)), 2), MAX_BURST)
        return Target(
            variant=server.variant,
            base_url=server.base_url,
            engine=plan.engine,
            model=server.model,
            context=self.experiment.run.env.server(server.variant).context_size,
            burst=burst,
            alive=self.alive_check(server),
            burst_tokens=min(plan.load.max_tokens, BURST_TOKENS),
            recover_s=self.spec.recover_s,
            timeout_s=self.spec.timeout_s,
        )

    @staticmethod
    def alive_check(server: ActiveServer):
        return server.process.alive if server.process is not None else (lambda: True)

    def recovery(self, server: ActiveServer, since: float) -> tuple[bool, float | None, str | None]:
        with http_session("faults") as http:
            return recover(http, self.target(server), since)

    def add(self, result: ProbeResult) -> None:
        """Keep the result (probes.json is rewritten at once); a failed server is a run event (exit 6)."""
        self.results.append(result)
        write_json(
            self.experiment.run.file(layout.PROBES), {"probes": [r.model_dump(mode="json") for r in self.results]}
        )
        if result.verdict == "server-failed" and result.variant not in self.failed:
            self.failed.add(result.variant)
            server = self.experiment.session.servers.get(result.variant)
            tail = server.process.log_tail() if server is not None and server.process is not None else None
            log.error("the %s server failed at probe %s: %s", result.variant, result.probe, result.note)
            self.experiment.run.note(
                ProbeServerFailed(variant=result.variant, probe=result.probe, reason=result.note, log_tail=tail)
            )
