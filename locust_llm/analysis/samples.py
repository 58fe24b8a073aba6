"""The raw samples of a level kept for comparisons: throughput bins per block and one row per request.

A level is measured in one or more blocks (a step each: repeats, or ABBA interleaving); the throughput bins
stay per block, keyed by step number, so a comparison pairs block ``r`` of one variant with block ``r`` of the
other (``rates.block_ratio_ci``). Only clean steps contribute samples; the others are listed with their status.
Requests carry their pairing key ``(worker, step, seq)``: the k-th request of a worker in a step had the same
prompt (and in open loop the same intended send time) in every variant, so variants are compared on pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .cycles import Batches
from .status import STATUSES

__all__ = ["PAIR_KEY", "LevelSamples", "not_judged", "paired"]

PAIR_KEY = ["worker", "step", "seq"]


@dataclass
class LevelSamples:
    token_blocks: dict[int, np.ndarray] = field(default_factory=dict)  # step -> output tokens/s per 1-s bin
    good_blocks: dict[int, np.ndarray] = field(default_factory=dict)  # step -> good requests/s per 1-s bin
    requests: pd.DataFrame = field(default_factory=pd.DataFrame)  # PAIR_KEY + per-request metrics
    excluded: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # step -> (status, reasons)
    bounds: dict[int, dict] = field(default_factory=dict)  # step -> what the client could do to each figure
    throughput_blocks: dict[int, Batches] = field(default_factory=dict)  # step -> its throughput batches (``cycles``)

    def add(
        self,
        step: int,
        status: str,
        reasons: list[str],
        token_rates: np.ndarray,
        good_rates: np.ndarray,
        requests: pd.DataFrame,
        bounds: dict | None = None,
        batches: Batches | None = None,
    ) -> None:
        if status != "clean":
            self.excluded[step] = (status, reasons)
            return
        self.bounds[step] = bounds or {}
        if batches is not None:
            self.throughput_blocks[step] = batches
        self.token_blocks[step] = token_rates
        self.good_blocks[step] = good_rates
        self.requests = requests if not len(self.requests) else pd.concat([self.requests, requests], ignore_index=True)

    @property
    def clean(self) -> bool:
        return bool(self.token_blocks)

    @property
    def token_rates(self) -> np.ndarray:
        return np.concatenate(list(self.token_blocks.values())) if self.token_blocks else np.empty(0)

    @property
    def throughput_batches(self) -> Batches:
        """The level's throughput batches, its clean blocks joined (``cycles.batch_ratio`` gives its figure)."""
        return Batches.joined(list(self.throughput_blocks.values()))

    @property
    def good_rates(self) -> np.ndarray:
        return np.concatenate(list(self.good_blocks.values())) if self.good_blocks else np.empty(0)

    def client_bound(self, figure: str, stat: str) -> list[float] | None:
        """``[below, above]``: how far the client could have moved ``figure``'s ``stat`` in any clean step of the
        level, as fractions (``validity.figure_bound``; the worst step's); None when no step says."""
        pairs = [b[figure][stat] for b in self.bounds.values() if figure in b and b[figure].get(stat)]
        if not pairs:
            return None
        return [
            max(p[0] if p[0] is not None else math.inf for p in pairs),
            max(p[1] if p[1] is not None else math.inf for p in pairs),
        ]

    def values(self, column: str) -> np.ndarray:
        if column not in self.requests:
            return np.empty(0)
        return self.requests[column].to_numpy(dtype=float)


def paired(variant: LevelSamples, baseline: LevelSamples, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``column`` of the requests both variants made with the same key and both measured; None when fewer
    than two such pairs exist (runs without a pairing key, or no overlap)."""
    v, b = variant.requests, baseline.requests
    if not len(v) or not len(b) or (v["seq"] < 0).all() or (b["seq"] < 0).all():
        return None
    joined = v[PAIR_KEY + [column]].merge(b[PAIR_KEY + [column]], on=PAIR_KEY, suffixes=("_v", "_b"))
    both = joined[np.isfinite(joined[f"{column}_v"]) & np.isfinite(joined[f"{column}_b"])]
    if len(both) < 2:
        return None
    return both[f"{column}_v"].to_numpy(dtype=float), both[f"{column}_b"].to_numpy(dtype=float)


def not_judged(*named: tuple[str, LevelSamples]) -> tuple[str | None, list[str]]:
    """The most serious status among the steps left out of a level (None when none was), and one line per
    reason under each variant's name, most serious first: a busy host must not hide behind a short step."""
    entries = [
        (status, f"{name} step {step}: {reason}")
        for name, samples in named
        for step, (status, reasons) in sorted(samples.excluded.items())
        for reason in reasons
    ]
    entries.sort(key=lambda entry: STATUSES.index(entry[0]))
    statuses = [status for _, samples in named for status, _ in samples.excluded.values()]
    return min(statuses, key=STATUSES.index, default=None), [line for _, line in entries]
