"""The quality check of a run: every task of the scenario's ``quality:`` set, asked of each variant's server before
its ladder, greedy and (at the sampling temperature) once per seed. The answers go to ``quality.json``; the analysis
scores them (``analysis.quality``), so a run's quality is judged from its files like every other figure.

Answers are asked one at a time: a batch shares the server's matrix products, and on some engines a batch of
another size changes the floating-point sums and so the greedy tokens; one at a time, every variant answers
under the same conditions.
"""

from __future__ import annotations

import logging
import time

from ..client.greedy import greedy_output
from ..client.http import session
from ..rundir import RunDir, layout, write_json
from ..rundir.consistency import Answer
from ..rundir.quality import QualityAnswer, QualityFile, QualityTask, VariantAnswers
from ..scenario.quality import read_tasks
from .plan import Plan

log = logging.getLogger(__name__)

__all__ = ["QualityProbes"]


class QualityProbes:
    """The task set (read once) and the answers so far, rewritten to ``quality.json`` after each variant."""

    def __init__(self, plan: Plan, run: RunDir):
        self.run = run
        self.engine = plan.engine
        self.doc: QualityFile | None = None
        spec = plan.scenario.quality
        if spec is None or "quality" in plan.skipped:
            return
        path = spec.tasks_path(plan.base_dir)
        temperature = spec.temperature if spec.temperature is not None else plan.load.temperature
        self.doc = QualityFile(
            tasks=str(path),
            temperature=temperature,
            max_drop_pct=spec.max_drop_pct,
            # At temperature 0 every seed would repeat the greedy answer: no sampled answers then.
            seeds=[plan.load.seed + i for i in range(spec.seeds)] if temperature > 0 else [],
            items=[
                QualityTask.model_validate({**item.model_dump(), "max_tokens": item.max_tokens or spec.max_tokens})
                for item in read_tasks(path)
            ],
            variants={},
        )

    def measure(self, variant: str, base_url: str, model: str) -> None:
        """Ask ``variant``'s server every task (greedy, then once per seed) and write ``quality.json``."""
        doc = self.doc
        if doc is None or variant in doc.variants:
            return  # a server started again (interleaved restarts, a restart fault) keeps its first answers
        items, seeds = doc.items, doc.seeds
        log.info(
            "quality check of %s: %d tasks greedy + %d sampled answers at temperature %g",
            variant,
            len(items),
            len(items) * len(seeds),
            doc.temperature,
        )
        started = time.monotonic()
        with session("quality") as http:

            def ask(item: QualityTask, **sampling) -> Answer:
                return greedy_output(
                    http, base_url, self.engine, model, item.prompt, item.max_tokens, ignore_eos=False, **sampling
                )

            greedy = [QualityAnswer.of(i, ask(item)) for i, item in enumerate(items)]
            sampled = [
                QualityAnswer.of(i, ask(item, temperature=doc.temperature, seed=seed), seed=seed)
                for i, item in enumerate(items)
                for seed in seeds
            ]
        doc.variants[variant] = VariantAnswers(greedy=greedy, sampled=sampled)
        write_json(self.run.file(layout.QUALITY), doc.written())
        log.info("quality answers of %s in %.1f s", variant, time.monotonic() - started)
