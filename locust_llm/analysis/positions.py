"""Decode speed by position in the output: whether a long answer keeps its pace (KV growth, a draft that loses the
thread), per request, per step, per variant and level, and the speed-up of a speculative variant by position. Pure.

Token ``i`` of a request (0-based) arrives with its chunk, at ``t(i)``. Bin ``k`` holds tokens ``kB .. (k+1)B - 1``
(``B`` = ``load.positions.bin_tokens``, 256 by default); a request's decode tok/s over it is

* bin 0: ``(B - 1) / (t(B - 1) - t(0))``, as decode tok/s leaves out the first token (TTFT covers it);
* bin k > 0: ``B / (t((k+1)B - 1) - t(kB - 1))``: the tokens that arrived after the bin before it ended.

Only bins a request completed count (a request of 300 tokens has bin 0 only), so a bin's figure is never a partial
one. With llama.cpp's per-token timings (``chunk_drafted`` / ``chunk_accepted``) the drafted and accepted tokens
of each bin are the growth of the request's counts over the same span, so acceptance has a figure per position
too. Intervals are over requests: the mean of a bin with a bootstrap interval, acceptance as a ratio of sums
resampled by request (``acceptance.ratio_of_sums``), the change from the first bin to the last as a paired ratio
(the same requests in both), and a variant's speed-up per bin paired with the baseline's request ``k``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fmt import ci_text, lvl
from .acceptance import ratio_of_sums
from .comparison import request_speedup
from .metrics import Chunks
from .samples import LevelSamples
from .speedup import paired_ratio_ci
from .stats import summarize

__all__ = [
    "MAX_BINS",
    "POSITION_STATUSES",
    "bin_columns",
    "level_positions",
    "position_speedups",
    "positions_summary",
    "request_positions",
    "step_positions",
]

MAX_BINS = 64  # positions past 64 bins are not reported (a bin of 256 tokens: 16,384 output tokens)
# The steps whose requests feed the curves and the speed-ups by position: clean ones, and those only unsteady. A long
# answer's throughput drifts within its window by the very slowdown measured here (streams that start together all
# slow down together), which the step's steadiness check reads as drift; what makes a step untrustworthy for any
# figure (a busy host, a client that lagged, too few requests, an injected fault, a lost worker) still excludes it.
POSITION_STATUSES = ("clean", "unsteady", "too-noisy")
N_BOOT = 1000


def bin_columns(k: int) -> tuple[str, str, str]:
    """The per-request columns of bin ``k``: decode tok/s, drafted and accepted tokens."""
    return f"pos_tps_{k}", f"pos_drafted_{k}", f"pos_accepted_{k}"


def request_positions(n_rows: int, chunks: Chunks, bin_tokens: int) -> pd.DataFrame:
    """Per request (``n_rows``, the rows ``chunks`` was built from, in order) and completed bin: decode tok/s, and
    the drafted and accepted tokens where the chunks carry per-token draft counts. No columns when no request
    completed a bin."""
    per_request = np.zeros(n_rows, dtype=np.int64)
    some = chunks.lengths > 0
    starts = (np.cumsum(chunks.lengths) - chunks.lengths)[some]
    per_request[some] = np.add.reduceat(chunks.tokens, starts, dtype=np.int64)
    bins = np.minimum(per_request // bin_tokens, MAX_BINS)
    if not bins.any():
        return pd.DataFrame(index=range(n_rows))
    cum = np.cumsum(chunks.tokens, dtype=np.int64)
    base = np.zeros(n_rows, dtype=np.int64)  # tokens of the requests before each one
    base[1:] = np.cumsum(per_request)[:-1]
    rows = np.repeat(np.arange(n_rows), bins)
    k = np.arange(rows.size) - np.repeat(np.cumsum(bins) - bins, bins)

    def chunk_of(index: np.ndarray) -> np.ndarray:  # the chunk that carried token ``index`` of its request
        return np.searchsorted(cum, base[rows] + index, side="right")

    stop = chunk_of((k + 1) * bin_tokens - 1)
    start = chunk_of(np.maximum(k * bin_tokens - 1, 0))
    count = np.where(k == 0, bin_tokens - 1, bin_tokens)
    span = chunks.offset[stop].astype(float) - chunks.offset[start].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = np.where(span > 0, count / span, np.nan)
    out = {}
    n_bins = int(bins.max())
    for j in range(n_bins):
        tps, drafted, accepted = bin_columns(j)
        at = k == j
        column = np.full(n_rows, np.nan)
        column[rows[at]] = speed[at]
        out[tps] = column
        if chunks.drafted is not None:
            assert chunks.accepted is not None  # the runtime writes both lists or neither
            for name, values in ((drafted, chunks.drafted), (accepted, chunks.accepted)):
                # growth over the bin; bin 0 from the request's start (nothing drafted before its first token)
                end, begin = values[stop[at]], np.where(j == 0, 0, values[start[at]])
                grown = np.where((end >= 0) & (begin >= 0), end - begin, np.nan).astype(float)
                column = np.full(n_rows, np.nan)
                column[rows[at]] = grown
                out[name] = column
    return pd.DataFrame(out)


def _bins(frame: pd.DataFrame) -> int:
    k = 0
    while bin_columns(k)[0] in frame:
        k += 1
    return k


def _values(frame: pd.DataFrame, column: str) -> np.ndarray:
    return frame[column].to_numpy(dtype=float) if column in frame else np.empty(0)


def curve(frame: pd.DataFrame, bin_tokens: int) -> list[dict]:
    """Per bin: requests, mean decode tok/s with its bootstrap interval, acceptance with its interval."""
    out = []
    for k in range(_bins(frame)):
        tps, drafted, accepted = bin_columns(k)
        speed = summarize(_values(frame, tps), n_boot=N_BOOT, seed=k)
        acceptance = ratio_of_sums(_values(frame, accepted), _values(frame, drafted)) if drafted in frame else None
        out.append(
            {
                "first_token": k * bin_tokens,
                "last_token": (k + 1) * bin_tokens - 1,
                "requests": speed["n"],
                "decode_tps": speed["mean"],
                "decode_tps_ci95": speed["ci95"]["mean"],
                "acceptance_rate": (acceptance or {}).get("value"),
                "acceptance_rate_ci95": (acceptance or {}).get("ci95"),
            }
        )
    return out


def step_positions(derived: pd.DataFrame, bin_tokens: int) -> list[dict] | None:
    """A step's curve, or None when no request completed a bin."""
    return curve(derived, bin_tokens) or None


def _span(k: int, bin_tokens: int) -> str:
    return f"tokens {k * bin_tokens:,}-{(k + 1) * bin_tokens:,}"


def level_positions(samples: LevelSamples, bin_tokens: int, variant: str, level: float, unit: str) -> dict | None:
    """A variant's curve at one level (clean steps pooled) and the change from the first bin to the last full one,
    paired by request, with the sentence that answers "does decode keep its pace over a long answer"."""
    frame = samples.requests
    bins = curve(frame, bin_tokens)
    if not bins:
        return None
    last = len(bins) - 1
    change = None
    if last > 0:
        first_tps, last_tps = bin_columns(0)[0], bin_columns(last)[0]
        change = paired_ratio_ci(_values(frame, last_tps), _values(frame, first_tps), np.mean, True, N_BOOT, last)
    text = None
    if change and change.get("value") is not None:
        ci = f"95% CI {ci_text(change['ci95'], lambda x: f'{x:.2f}')}" if change.get("ci95") else "no CI"
        text = (
            f"{variant} at {lvl(level)} {unit}: decode speed at {_span(last, bin_tokens)} is {change['value']:.2f}x "
            f"of {_span(0, bin_tokens)} ({ci}; {change['pairs']} requests)"
        )
    return {
        "variant": variant,
        "level": level,
        "bins": bins,
        "last_vs_first": change,
        "text": text,
    }


def position_speedups(v: LevelSamples, b: LevelSamples, bin_tokens: int, seed: int) -> list[dict]:
    """The variant's decode tok/s speed-up per bin, paired with the baseline's request ``k`` (the same prompt)."""
    out = []
    for k in range(min(_bins(v.requests), _bins(b.requests))):
        ratio = request_speedup(v, b, bin_columns(k)[0], np.mean, True, seed + k)
        out.append({"first_token": k * bin_tokens, "last_token": (k + 1) * bin_tokens - 1, **ratio})
    return out


def positions_summary(
    samples: dict[str, dict[float, LevelSamples]], baseline: str | None, modes: dict[str, str], bin_tokens: int
) -> dict | None:
    """Every variant's curve per level, each other variant's speed-up by position against ``baseline`` at the levels
    both measured, and the one-line answers; None when no request completed a bin. ``samples`` hold the requests of
    the steps whose status is in ``POSITION_STATUSES``."""
    curves = []
    for variant, by_level in samples.items():
        unit = "req/s" if modes.get(variant) == "open" else "concurrent streams"
        for level in sorted(by_level):
            found = (
                level_positions(by_level[level], bin_tokens, variant, level, unit) if by_level[level].clean else None
            )
            if found is not None:
                curves.append(found)
    if not curves:
        return None
    compared = []
    base = samples.get(baseline, {}) if baseline is not None else {}
    for variant, other in samples.items():
        if variant == baseline:
            continue
        for seed, level in enumerate(sorted(set(base) & set(other))):
            if not (base[level].clean and other[level].clean):
                continue
            bins = position_speedups(other[level], base[level], bin_tokens, 100 * seed)
            if bins:
                compared.append({"baseline": baseline, "variant": variant, "level": level, "bins": bins})
    return {
        "bin_tokens": bin_tokens,
        "steps_used": list(POSITION_STATUSES),
        "curves": curves,
        "comparisons": compared,
        "text": [c["text"] for c in curves if c["text"]],
    }
