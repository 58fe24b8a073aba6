"""One run against an earlier one (or a saved baseline): per variant and level, the change with its CI.

A change is flagged only when it is outside the noise (its 95% CI excludes "no change"); it is a
regression beyond the threshold when, in addition, the new run is worse by more than
``max_regression_pct`` percent. Pure: reads RunData only.
"""

from __future__ import annotations

import numpy as np

from .compare import ratio_ci
from .stats import percentile_stat
from .summary import RunData, analyse

# metric -> (how to get the samples, statistic, higher is better)
METRICS = {
    "output_tps": (lambda s: s.token_rates, np.mean, True),
    "decode_tps": (lambda s: s.decode_tps, np.mean, True),
    "tpot_p50": (lambda s: s.tpot_ms, percentile_stat(50), False),
    "tpot_p95": (lambda s: s.tpot_ms, percentile_stat(95), False),
    "ttft_p95": (lambda s: s.ttft_ms, percentile_stat(95), False),
}
N_BOOT = 1000


def compare_runs(old: RunData, new: RunData, max_regression_pct: float = 5.0) -> dict:
    """``{"rows": [...], "regressions": [...], "max_regression_pct"}``; ratio > 1 means the new run is better."""
    _, old_samples, _ = analyse(old)
    _, new_samples, _ = analyse(new)
    rows, regressions = [], []
    for variant in sorted(set(old_samples) & set(new_samples)):
        for i, level in enumerate(sorted(set(old_samples[variant]) & set(new_samples[variant]))):
            for metric, (get, statistic, higher_is_better) in METRICS.items():
                ratio = ratio_ci(get(new_samples[variant][level]), get(old_samples[variant][level]), statistic,
                                 higher_is_better, N_BOOT, seed=i)
                ci = ratio["ci95"]
                change = "no data" if ratio["value"] is None else "within noise"
                if ci is not None and ci[0] > 1:
                    change = "better"
                elif ci is not None and ci[1] < 1:
                    change = "worse"
                row = {"variant": variant, "level": level, "metric": metric, "ratio": ratio["value"], "ci95": ci,
                       "change": change}
                rows.append(row)
                if change == "worse" and ratio["value"] < 1 - max_regression_pct / 100:
                    regressions.append(row)
    return {"old": old.env.get("run_id"), "new": new.env.get("run_id"), "max_regression_pct": max_regression_pct,
            "rows": rows, "regressions": regressions}


def format_text(result: dict) -> str:
    lines = [f"compare {result['old']} -> {result['new']} (ratio > 1: new is better; "
             f"regression: worse beyond the noise and by more than {result['max_regression_pct']:g}%)"]
    lines.append(f"{'variant':<18} {'level':>6} {'metric':<11} {'ratio':>7}  {'95% CI':<17} change")
    for row in result["rows"]:
        ci = f"[{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]" if row["ci95"] else "-"
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        mark = "  REGRESSION" if row in result["regressions"] else ""
        lines.append(f"{row['variant']:<18} {row['level']:>6g} {row['metric']:<11} {ratio:>7}  {ci:<17} "
                     f"{row['change']}{mark}")
    lines.append(f"{len(result['regressions'])} regression(s)")
    return "\n".join(lines)
