"""The ladder programs on the master: every variant over its blocks one after the other, or interleaved per level in
ABBA blocks (``load.order``), each variant's scale-out and probes after its ladder.

The functions take the ``Conductor`` (``runtime.conductor``) that ``runtime.experiment.Experiment`` implements.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..analysis.cycles import Batches, block_throughput_ratio
from ..records import Phase
from ..rundir.events import SweepStopped
from .conductor import Conductor, Tick
from .plan import Block
from .scale_out import scale_out

log = logging.getLogger(__name__)

__all__ = ["interleaved", "sequential", "sweeps_lost"]


def sequential(exp: Conductor) -> Iterator[Tick]:
    """Each variant over every block (the ladder, repeats, context lengths), then the next variant."""
    for variant in exp.plan.variants:
        if exp.interrupted:
            break
        if not exp.bring_up(variant):
            continue
        for block in exp.blocks():
            yield from exp.measure(variant, block)
            if not exp.session.alive() or exp.interrupted:
                break
        exp.broadcast(variant, exp.state.step, exp.state.level, Phase.DRAIN)
        yield from exp.drain()
        yield from scale_out(exp, variant)
        yield from exp.faults.probe(variant)
        exp.session.stop()


def interleaved(exp: Conductor) -> Iterator[Tick]:
    """Per level, blocks of every variant in ABBA order (reversed every other repeat), so that drift and passing
    neighbours hit both sides alike. Servers stay up together, or (``server.interleave: restart``) the block's
    server is started for it. A sweep stops climbing the levels (of the ladder, or of a context length) once every
    swept setting is clearly slower than the baseline."""
    together = bool(exp.plan.external_url) or exp.plan.scenario.server.servers_together
    variants = [v for v in exp.plan.variants if not together or exp.bring_up(v)]
    checked: set[str] = set()  # restart mode: variants whose consistency prompts were asked already
    dropped: dict[int, set[str]] = {}  # per group: swept variants left out of the higher levels
    order = sorted(exp.blocks(), key=lambda b: (b.group, b.index, b.repeat))
    for block in order:
        active = [v for v in variants if v not in dropped.get(block.group, set())]
        if (len(active) < 2 and len(variants) >= 2) or block.context in exp.too_long:
            continue  # nothing left to compare with the baseline at this level, or a context too long
        for variant in active if block.repeat % 2 == 0 else active[::-1]:
            if exp.interrupted:
                return
            if together:
                if variant not in exp.session.servers:
                    continue  # it died in an earlier block
                exp.session.activate(variant)
            else:
                exp.session.stop()
                if not exp.bring_up(variant, check=variant not in checked):
                    continue
                checked.add(variant)
            yield from exp.measure(variant, block)
            # No stream of this block may still run on its server while the next block's server is measured.
            exp.broadcast(variant, block.step, block.level, Phase.DRAIN, context=block.context)
            yield from exp.drain()
            if not exp.session.alive():
                exp.session.stop(variant)
        if block.repeat == exp.plan.load.repeats - 1:
            lost = sweeps_lost(exp, block)
            if lost:
                dropped.setdefault(block.group, set()).update(lost)


def sweeps_lost(exp: Conductor, block: Block) -> set[str]:
    """The variants of every sweep whose settings were all clearly slower than the baseline at this level (the
    level's blocks' request-cycle batches, the analysis's block-paired interval): measuring them at higher levels
    would only cost time."""
    baseline = exp.plan.scenario.baseline_variant
    steps = {b.step for b in exp.blocks() if (b.group, b.index) == (block.group, block.index)}

    def batches(variant: str) -> dict[int, Batches]:
        return {step: b for (v, step), b in exp.throughput.items() if v == variant and step in steps}

    lost = set()
    for name, sweep in exp.plan.scenario.sweeps.items():
        swept = [v for v in sweep.variants if v in exp.plan.variants]
        ratios = [block_throughput_ratio(batches(v), batches(baseline)) for v in swept]
        if swept and all(isinstance(ci := r["ci95"], list) and ci[1] < 1 for r in ratios):
            log.warning(
                "sweep %s: every setting clearly slower than %s at level %g; not measuring it at higher levels",
                name,
                baseline,
                block.level,
            )
            exp.run.note(
                SweepStopped(
                    sweep=name,
                    level=block.level,
                    context=block.context or None,
                    speedups=[r["value"] for r in ratios],
                )
            )
            lost.update(swept)
    return lost
