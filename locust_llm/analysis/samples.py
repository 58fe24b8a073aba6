"""The raw samples of a step kept for comparisons: throughput bins and one row per request, pooled per level.

Requests carry their pairing key ``(worker, step, seq)``: the k-th request of a worker in a step had the same
prompt (and in open loop the same intended send time) in every variant, so variants are compared on pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["PAIR_KEY", "StepSamples", "paired"]

PAIR_KEY = ["worker", "step", "seq"]


@dataclass
class StepSamples:
    token_rates: np.ndarray  # output tokens per second, one value per 1-second bin of the steady window
    good_rates: np.ndarray  # requests per second that were good (succeeded and met the SLOs), per bin
    requests: pd.DataFrame  # PAIR_KEY + the per-request metrics (analysis.metrics.request_metrics)

    def pooled_with(self, other: "StepSamples") -> "StepSamples":
        """A repeated ladder measures a level more than once; its samples are pooled."""
        return StepSamples(np.concatenate([self.token_rates, other.token_rates]),
                           np.concatenate([self.good_rates, other.good_rates]),
                           pd.concat([self.requests, other.requests], ignore_index=True))

    def values(self, column: str) -> np.ndarray:
        return self.requests[column].to_numpy(dtype=float)


def paired(variant: StepSamples, baseline: StepSamples, column: str) -> tuple[np.ndarray, np.ndarray] | None:
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
