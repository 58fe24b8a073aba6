"""Conversations (``load.conversation``) in the figures. Pure.

* Per step, ``by_turn``: the steady window's requests of each turn (turn t carries the whole history of the turns
  before it), with TTFT and TPOT percentiles and the prompt tokens the server counted (and the prompt tokens its
  prefix cache served, where a ``cached_tokens`` column says so); and ``conversations``: what became of the step's
  conversations (completed, cut short when the step ended, ended by a failed turn, dropped at the in-flight cap).
* Per run (``Summary.conversations``): per variant, level and turn the clean steps pooled; the speed-ups by turn
  against the baseline (paired by request: the same conversation's same turn); and how many paired turns carried
  a different history than the baseline's (the variants answered an earlier turn differently).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..rundir.env import RecordedLoad
from .samples import PAIR_KEY, LevelSamples, paired
from .speedup import paired_ratio_ci, ratio_ci
from .stats import mean_of, percentile_of, percentile_stat

__all__ = [
    "by_turn",
    "conversation_summary",
    "step_conversations",
]

N_BOOT = 1000
TURN_COLUMNS = ("turn", "prompt_tokens", "cached_tokens")  # kept beside a level's per-request metrics


def _pct(values: pd.Series, q: float) -> float | None:
    return percentile_of(values.to_numpy(dtype=float), q)


def by_turn(sent: pd.DataFrame, derived: pd.DataFrame, mode: str) -> list[dict] | None:
    """Per turn, the steady window's requests (``sent``) and their metrics (``derived``); None outside
    conversations."""
    if "turn" not in sent or not (sent["turn"] > 0).any():
        return None
    ok = sent["error_class"].isna()
    out = []
    for turn in sorted(int(t) for t in sent["turn"].unique() if t > 0):
        mine = sent["turn"] == turn
        rows, figures = sent[mine & ok], derived[mine & ok]
        cached = rows["cached_tokens"] if "cached_tokens" in rows else pd.Series(dtype=float)
        out.append(
            {
                "turn": turn,
                "requests": int(mine.sum()),
                "errors": int((mine & ~ok).sum()),
                "ttft_p50_ms": _pct(figures["ttft_ms"], 50),
                "ttft_p95_ms": _pct(figures["ttft_ms"], 95),
                "ttft_p99_ms": _pct(figures["ttft_ms"], 99),
                "ttft_sched_p50_ms": _pct(figures["ttft_sched_ms"], 50) if mode == "open" else None,
                "tpot_p50_ms": _pct(figures["tpot_ms"], 50),
                "tpot_p95_ms": _pct(figures["tpot_ms"], 95),
                "tpot_p99_ms": _pct(figures["tpot_ms"], 99),
                "decode_tps": mean_of(figures["decode_tps"].to_numpy(dtype=float)),
                "prompt_tokens": mean_of(rows["prompt_tokens"].where(rows["prompt_tokens"] >= 0).to_numpy(float)),
                "cached_tokens": mean_of(cached.to_numpy(dtype=float)),
            }
        )
    return out


def step_conversations(rows: pd.DataFrame) -> dict | None:
    """What became of the conversations of one step (``rows``: its requests, every phase); None outside
    conversations."""
    if "turn" not in rows or not (rows["turn"] > 0).any():
        return None
    turns = rows[rows["turn"] > 0]
    started = turns.groupby(["worker", "conversation"], sort=False)
    last = turns.sort_values("turn").groupby(["worker", "conversation"], sort=False).tail(1)
    failed = last["error_class"].notna()
    dropped = last["error_class"] == "dropped_inflight_cap"
    done = ~failed & (last["turn"] >= last["turns"])
    return {
        "started": int(started.ngroups),
        "completed": int(done.sum()),
        "cut_short": int((~failed & ~done).sum()),
        "failed": int((failed & ~dropped).sum()),
        "dropped": int(dropped.sum()),
        "turns_sent": int(turns["t_send"].notna().sum()),
        "turns_planned": int(last["turns"].sum()),
    }


def _turn(samples: LevelSamples, turn: int) -> LevelSamples:
    return LevelSamples(requests=samples.requests[samples.requests["turn"] == turn])


def _speedup(v: LevelSamples, b: LevelSamples, column: str, statistic, higher_is_better: bool) -> dict:
    pairs = paired(v, b, column)
    if pairs is not None:
        return paired_ratio_ci(*pairs, statistic, higher_is_better, N_BOOT, 0)
    return {**ratio_ci(v.values(column), b.values(column), statistic, higher_is_better, N_BOOT, 0), "pairs": 0}


def histories(frame: pd.DataFrame, baseline: str, variant: str) -> dict:
    """Paired turns (from turn 2 on) whose history differs from the baseline's."""
    keys = PAIR_KEY
    rows = frame[(frame["turn"] > 1) & frame["t_send"].notna()][["variant", *keys, "history"]]
    joined = rows[rows["variant"] == variant].merge(rows[rows["variant"] == baseline], on=keys, suffixes=("", "_b"))
    diverged = int((joined["history"].fillna("") != joined["history_b"].fillna("")).sum())
    text = (
        f"{variant}: {diverged} of {len(joined)} paired turns carried a different history than {baseline}'s "
        f"(the earlier answers differed)"
        if len(joined)
        else f"{variant}: no turn after the first was sent by both {variant} and {baseline}"
    )
    return {"variant": variant, "compared": int(len(joined)), "diverged": diverged, "text": text}


def conversation_summary(
    frame: pd.DataFrame,
    samples: dict[str, dict[float, LevelSamples]],
    baseline: str | None,
    load: RecordedLoad,
    modes: dict,
) -> dict | None:
    """The run's conversations by turn: figures per variant, level and turn, speed-ups and diverged histories."""
    spec = load.conversation
    if not spec or "turn" not in frame:
        return None
    levels, comparisons = [], []
    for name, by_level in samples.items():
        ttft = "ttft_sched_ms" if modes.get(name) == "open" else "ttft_ms"
        for level, level_samples in sorted(by_level.items()):
            if "turn" not in level_samples.requests:
                continue
            for turn in sorted(int(t) for t in level_samples.requests["turn"].unique() if t > 0):
                mine = _turn(level_samples, turn)
                cached = mine.values("cached_tokens")
                levels.append(
                    {
                        "variant": name,
                        "level": level,
                        "turn": turn,
                        "requests": int(len(mine.requests)),
                        "ttft_p50_ms": percentile_of(mine.values(ttft), 50),
                        "tpot_p50_ms": percentile_of(mine.values("tpot_ms"), 50),
                        "decode_tps": mean_of(mine.values("decode_tps")),
                        "prompt_tokens": mean_of(mine.values("prompt_tokens")),
                        "cached_tokens": mean_of(cached) if cached.size else None,
                    }
                )
                base = samples[baseline].get(level) if baseline in samples else None
                if name == baseline or base is None or "turn" not in base.requests:
                    continue
                other = _turn(base, turn)
                comparisons.append(
                    {
                        "variant": name,
                        "level": level,
                        "turn": turn,
                        "ttft_p50_speedup": _speedup(mine, other, ttft, percentile_stat(50), False),
                        "tpot_p50_speedup": _speedup(mine, other, "tpot_ms", percentile_stat(50), False),
                        "decode_tps_speedup": _speedup(mine, other, "decode_tps", np.mean, True),
                    }
                )
    return {
        "turns": spec.turns,
        "think_s": spec.think_s,
        "levels": levels,
        "comparisons": comparisons,
        "histories": [histories(frame, baseline, n) for n in dict.fromkeys(frame["variant"]) if n != baseline]
        if baseline
        else [],
    }
