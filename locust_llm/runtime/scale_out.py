"""The scale-out steps on the master: one server against N of the same variant, after the variant's ladder.

The variant's server is up and idle (its ladder drained). The N - 1 further servers are launched on free ports
(or the external replicas are checked), then ``pairs`` pairs of steps run in ABBA order: one server at the plan's
level, N servers at N x that level with the requests spread round-robin (``StepState.base_urls``). Each step is a
``steps.json`` row with ``servers``, ``server_level`` and ``pair``, numbered after the ladder's blocks, so the
ladder's analysis never sees it and the scale-out's pairs it by ``pair`` (``analysis.scale_out``). Telemetry follows
the first server only. Scale-out comes before the probe suite, which may leave a server broken.

The functions take the ``Conductor`` (``runtime.conductor``) that ``runtime.experiment.Experiment`` implements.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..records import Phase
from ..rundir.events import ScaleOutFailed
from ..servers import ServerError
from .conductor import Conductor, Tick
from .plan import Block, plan_blocks

log = logging.getLogger(__name__)

__all__ = ["scale_out", "scale_out_all", "scale_out_steps"]


def scale_out_steps(exp: Conductor) -> int:
    """Steps the scale-out adds to each variant's run (0 when it is off)."""
    plan = exp.plan.scale_out
    return 2 * plan.pairs if plan is not None else 0


def scale_out(exp: Conductor, variant: str) -> Iterator[Tick]:
    """The scale-out pairs of ``variant``, its server up and idle; the further servers are stopped afterwards."""
    plan = exp.plan.scale_out
    session = exp.session
    if plan is None or exp.interrupted or variant not in session.servers or not session.alive():
        return
    session.activate(variant)
    try:
        urls = session.start_replicas(variant, plan.servers, plan.urls)
    except ServerError as exc:
        log.error("variant %s: no scale-out: %s", variant, exc)
        exp.run.note(ScaleOutFailed(variant=variant, error=str(exc)))
        session.stop_replicas()
        return
    base = len(plan_blocks(exp.plan.load))
    log.info(
        "scale-out of %s: 1 server against %d at %g per server, %d pair(s) of steps",
        variant,
        plan.servers,
        plan.level,
        plan.pairs,
    )
    order = [
        (pair, servers)
        for pair in range(plan.pairs)
        for servers in ((1, plan.servers) if pair % 2 == 0 else (plan.servers, 1))
    ]
    for index, (pair, servers) in enumerate(order):
        if exp.interrupted or not session.alive():
            break
        if not session.replicas_alive():
            log.error("a scale-out server of %s exited; the scale-out stops here", variant)
            exp.run.note(
                ScaleOutFailed(
                    variant=variant,
                    error="a scale-out server exited",
                    log_tails=[r.log_tail() for r in session.replicas if not r.alive()],
                )
            )
            break
        block = Block(base + index, servers * plan.level, 0, pair, -1, index)
        yield from exp.measure(variant, block, urls[:servers])
    exp.broadcast(variant, exp.state.step, exp.state.level, Phase.DRAIN)
    yield from exp.drain()
    session.stop_replicas()


def scale_out_all(exp: Conductor) -> Iterator[Tick]:
    """After interleaved blocks: each variant in turn (``interleave: restart`` starts each server again)."""
    if exp.plan.scale_out is None:
        return
    for variant in exp.plan.variants:
        if exp.interrupted:
            return
        if variant not in exp.session.servers:
            exp.session.stop()
            if not exp.bring_up(variant, check=False):
                continue
        yield from scale_out(exp, variant)
