"""The soak program: one level of one variant held for ``--soak DURATION`` as consecutive windows.

Each window is a step row of ``steps.json`` with a ``window`` index, so the analysis computes every per-step
figure per window and the run directory's contract stays the same. After every window, everything a report needs
is on disk: ``steps.json``, the host and client samples (records and telemetry go to their part files every 2 s
anyway), so a soak killed with SIGKILL is still reported by ``locust-llm report RUN_DIR`` up to its last record.
SIGTERM and Ctrl-C take the experiment's interrupt path, which writes the whole report.

The functions take the ``Conductor`` (``runtime.conductor``) that ``runtime.experiment.Experiment`` implements.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Generator, Iterator

from ..records import Phase, now
from ..rundir.steps import StepRow
from ..scenario.soak import SoakPlan
from .conductor import Conductor, Tick

log = logging.getLogger(__name__)

__all__ = ["soak_program", "soak_progress"]


def soak_program(exp: Conductor) -> Iterator[Tick]:
    """Start the soak's server, hold its level window after window, then drain and stop it."""
    soak = exp.plan.soak
    assert soak is not None  # the experiment runs this program for a soak only
    exp.run.env.soak = soak
    exp.run.write_env()
    if not exp.bring_up(soak.variant):
        return
    users = exp.users_for(soak.level)
    tick = exp.tick(users)
    unit = "req/s" if exp.plan.load.mode == "open" else "users"
    log.info(
        "soak: %s at %g %s for %gs, %d windows of %gs (after a %gs warm-up)",
        soak.variant,
        soak.level,
        unit,
        soak.duration_s,
        soak.windows,
        soak.window_s,
        exp.plan.load.warmup_s,
    )
    first = None  # when the first window's measurement began: the windows' ends lie on a grid from here
    for index in range(soak.windows):
        if exp.interrupted or not exp.session.alive():
            break
        row = yield from window(exp, soak, index, tick, first)
        first = row.t_steady if first is None else first
        exp.checkpoint()
        if math.isfinite(row.t_steady):
            log.info(
                "soak window %d/%d done; about %ds left",
                index + 1,
                soak.windows,
                max(first + soak.duration_s - now(), 0),
            )
    exp.broadcast(soak.variant, exp.state.step, soak.level, Phase.DRAIN)
    yield from exp.drain()
    exp.session.stop()


def window(
    exp: Conductor, soak: SoakPlan, index: int, tick: Tick, first: float | None
) -> Generator[Tick, None, StepRow]:
    """One window; the first has the warm-up before it. Returns its steps.json row."""
    load = exp.plan.load
    # Later windows begin where the one before ended: no token falls between two windows.
    begin = now() if first is None else exp.run.steps[-1].t_end
    row = StepRow(
        variant=soak.variant,
        step=index,
        window=index,
        level=soak.level,
        mode=load.mode,
        users=tick[0],
        context=None,
        t_start=begin,
        t_steady=math.nan,
        t_end=math.nan,
    )
    exp.run.steps.append(row)
    exp.run.write_steps()
    if first is None:
        assert exp.session.server is not None  # brought up for the soak
        exp.session.prime([exp.session.server.base_url])  # shared prefixes into the cache before the first window
    if first is None and load.warmup_s > 0:
        exp.broadcast(soak.variant, index, soak.level, Phase.WARMUP, t_start=row.t_start)
        yield from exp.hold(row.t_start + load.warmup_s, tick)
        if exp.interrupted:
            row.t_end = now()  # no steady window: shown as not measured
            return row
    row.t_steady = now() if first is None else begin
    exp.run.write_steps()
    # A new step: open-loop dispatchers start a new arrival clock at its start, closed-loop users label their next
    # requests with it; requests in flight keep their window's label, their tokens count where they arrive.
    exp.broadcast(soak.variant, index, soak.level, Phase.STEADY, t_start=row.t_start if first is None else row.t_steady)
    start = row.t_steady if first is None else first
    yield from exp.hold(start + (index + 1) * soak.window_s, tick)
    row.t_end = now()
    return row


def soak_progress(exp: Conductor) -> dict:
    """``Experiment.progress()`` for a soak: the window in progress and the time left in it and in the soak."""
    soak, load = exp.plan.soak, exp.plan.load
    assert soak is not None  # the experiment asks for a soak's progress only
    rows = exp.run.steps
    if rows and math.isfinite(rows[0].t_steady):
        first = rows[0].t_steady
        run_left = max(first + soak.duration_s - now(), 0.0)
        step_left = max(first + len(rows) * soak.window_s - now(), 0.0) if math.isnan(rows[-1].t_end) else 0.0
    else:  # starting the server, or warming up
        step_left, run_left = load.warmup_s + soak.window_s, load.warmup_s + soak.duration_s
    return {
        "variant": exp.state.variant,
        "level": exp.state.level,
        "context": exp.state.context,
        "phase": exp.state.phase,
        "mode": load.mode,
        "step": len(rows),
        "steps": soak.windows,
        "step_left_s": round(step_left, 1),
        "extended_s": 0.0,
        "run_left_s": round(run_left, 1),
        "finished": exp.finished,
        "interrupted": exp.interrupted,
    }
