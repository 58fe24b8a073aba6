"""One run against an earlier one (or a saved baseline): per variant and level, the change with its CI.

Only the clean steps of both runs are compared (a step measured on a busy host says nothing about the server).
A change is flagged only when it is outside the noise (its 95% CI excludes "no change"); it is a
regression beyond the threshold when, in addition, the new run is worse by more than
``max_regression_pct`` percent. Throughput uses the time-series interval of ``rates``, blocks paired by step
number. Pure: reads RunData only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..rundir.load import RunData
from .documents.regression import RunComparison
from .prompt_cache import cache_mode
from .rates import block_ratio_ci
from .samples import LevelSamples
from .speedup import ratio_ci
from .stats import Statistic, percentile_stat
from .summary import analyse

__all__ = ["compare_runs"]

# per-request metric -> (how to get the samples, statistic, higher is better); output_tps goes by blocks
METRICS: dict[str, tuple[Callable[[LevelSamples], np.ndarray], Statistic, bool]] = {
    "decode_tps": (lambda s: s.values("decode_tps"), np.mean, True),
    "tpot_p50": (lambda s: s.values("tpot_ms"), percentile_stat(50), False),
    "tpot_p95": (lambda s: s.values("tpot_ms"), percentile_stat(95), False),
    "ttft_p95": (lambda s: s.values("ttft_ms"), percentile_stat(95), False),
}
N_BOOT = 1000


def uncompared(old: dict[str, dict[float, LevelSamples]], new: dict[str, dict[float, LevelSamples]]) -> list[str]:
    """Why each variant and level of either run is not compared: measured in one run only, or not clean in one."""
    out = []
    for variant in sorted(set(old) | set(new)):
        if variant not in new or variant not in old:
            out.append(f"variant {variant}: only in the {'old' if variant in old else 'new'} run")
            continue
        for level in sorted(set(old[variant]) | set(new[variant])):
            sides = {"old": old[variant].get(level), "new": new[variant].get(level)}
            missing = [side for side, samples in sides.items() if samples is None]
            if missing:
                out.append(f"{variant} level {level:g}: not measured in the {missing[0]} run")
                continue
            unclean = [
                f"the {side} run's steps are not clean ({_statuses(samples)})"
                for side, samples in sides.items()
                if samples is not None and not samples.clean
            ]
            if unclean:
                out.append(f"{variant} level {level:g}: " + "; ".join(unclean))
    return out


def _statuses(samples: LevelSamples) -> str:
    said = [f"{status}: {', '.join(reasons)}" if reasons else status for status, reasons in samples.excluded.values()]
    return "; ".join(dict.fromkeys(said)) or "no step"


def compare_runs(old: RunData, new: RunData, max_regression_pct: float = 5.0) -> RunComparison:
    """Every variant and level both runs measured; ratio > 1 means the new run is better."""
    old_samples, new_samples = analyse(old).samples, analyse(new).samples
    rows, regressions = [], []
    not_compared = uncompared(old_samples, new_samples)
    for variant in sorted(set(old_samples) & set(new_samples)):
        levels = [
            level
            for level in sorted(set(old_samples[variant]) & set(new_samples[variant]))
            if old_samples[variant][level].clean and new_samples[variant][level].clean
        ]
        for i, level in enumerate(levels):
            new_level, old_level = new_samples[variant][level], old_samples[variant][level]
            ratios = {"output_tps": block_ratio_ci(new_level.token_blocks, old_level.token_blocks)}
            for metric, (get, statistic, higher_is_better) in METRICS.items():
                ratios[metric] = ratio_ci(get(new_level), get(old_level), statistic, higher_is_better, N_BOOT, seed=i)
            for metric, ratio in ratios.items():
                ci = ratio["ci95"]
                change = "no data" if ratio["value"] is None else "within noise"
                if ci is not None and ci[0] > 1:
                    change = "better"
                elif ci is not None and ci[1] < 1:
                    change = "worse"
                row = {
                    "variant": variant,
                    "level": level,
                    "metric": metric,
                    "ratio": ratio["value"],
                    "ci95": ci,
                    "change": change,
                }
                rows.append(row)
                if change == "worse" and ratio["value"] < 1 - max_regression_pct / 100:
                    regressions.append(row)
    modes = cache_mode(old.env), cache_mode(new.env)
    return RunComparison(
        old=old.env.run_id,
        old_dir=str(old.run_dir) if old.run_dir else None,
        new=new.env.run_id,
        max_regression_pct=max_regression_pct,
        rows=rows,
        regressions=regressions,
        not_compared=not_compared,
        prompt_cache=None
        if modes[0] == modes[1]
        else f"the runs' prompts differ: {modes[0]} in {old.env.run_id}, {modes[1]} in "
        f"{new.env.run_id}; a change of TTFT or throughput may be the prompt cache's, not the server's",
    )
