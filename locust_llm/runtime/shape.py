"""The ladder shape: variants in sequence, each stepping through the ladder; runs on the master only."""

from __future__ import annotations

from collections.abc import Iterator

from locust import LoadTestShape

from . import plugin

__all__ = ["LadderShape"]


class LadderShape(LoadTestShape):
    """Advances the current ``Experiment.program()`` once per tick; ``None`` ends the test."""

    def __init__(self) -> None:
        super().__init__()
        self._program: Iterator[tuple] | None = None

    def tick(self) -> tuple | None:
        experiment = plugin.state_of(self.runner.environment).experiment
        if self._program is None or experiment is None or experiment.finished:
            experiment = plugin.start_experiment(self.runner.environment)
            if experiment is None:
                return None
            self._program = experiment.program()
        try:
            return next(self._program)
        except StopIteration:
            self._program = None
            return None
