"""Acceptance from the responses themselves, one request as the unit, with 95% intervals. Pure.

Two figures over a set of successful requests:

* rate = sum of accepted / sum of drafted tokens, from the per-request ``timings`` llama.cpp returns
  (``draft_n``, ``draft_n_accepted``);
* mean acceptance length = tokens per target forward pass after the first token (the first comes from the
  prefill). From the timings: sum(n - 1) / sum(n - 1 - accepted), since each pass yields its accepted drafts
  plus one token of its own. Without them (vLLM, SGLang, whose OpenAI streams carry no draft counts but send
  one chunk per engine step): tokens after the first chunk / chunks after the first. Both count the passes
  that drafted nothing, which the server's 1 + accepted / drafts leaves out.

The intervals are percentile bootstraps over requests, the ratio of sums recomputed on each resample. Tokens
are not independent trials (a draft is accepted as a prefix, and a request's context sets how well the draft
model guesses all of its tokens), so a binomial (Wilson) interval over tokens would be too narrow; requests
are. The server's counters are window totals with no per-request split to resample: they stay point values.
"""

from __future__ import annotations

import numpy as np

from .samples import LevelSamples
from .stats import percentile_interval, resample_indices

__all__ = ["N_BOOT", "TIMINGS", "CHUNKS", "ratio_of_sums", "request_acceptance"]

N_BOOT = 1000
TIMINGS = "per-request timings (llama.cpp draft_n / draft_n_accepted)"
CHUNKS = "tokens per chunk after the first (one chunk per engine step)"


def ratio_of_sums(num: np.ndarray, den: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> dict | None:
    """``sum(num) / sum(den)`` over the rows where both are finite, with a bootstrap 95% interval over rows
    (null with fewer than two rows); None when the denominator sums to zero."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    keep = np.isfinite(num) & np.isfinite(den)
    num, den = num[keep], den[keep]
    if not den.size or den.sum() <= 0:
        return None
    out: dict[str, object] = {"value": float(num.sum() / den.sum()), "ci95": None, "requests": int(den.size)}
    if den.size >= 2:
        parts = []
        for idx in resample_indices(den.size, n_boot, np.random.default_rng(seed)):
            totals = den[idx].sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                parts.append(np.where(totals > 0, num[idx].sum(axis=1) / totals, np.nan))
        interval = percentile_interval(np.concatenate(parts))
        out["ci95"] = list(interval) if interval else None
    return out


def _successful(samples: LevelSamples, column: str, ok: np.ndarray) -> np.ndarray:
    values = samples.values(column)
    return values[ok] if values.size else np.full(int(ok.sum()), np.nan)


def request_acceptance(samples: LevelSamples) -> dict | None:
    """Rate and mean acceptance length of a level's clean requests with their intervals, or None when the
    responses say nothing about drafting (no timings) and carry no per-chunk token split."""
    tokens = samples.values("output_tokens")
    if not tokens.size:
        return None
    ok = np.isfinite(tokens)  # successful requests only (failed ones carry no token count here)
    tokens = tokens[ok]
    drafted, accepted = _successful(samples, "draft_n", ok), _successful(samples, "draft_accepted", ok)
    if np.nansum(drafted) > 0:
        # llama.cpp leaves draft_* out of a response that drafted nothing: such a request drafted 0 tokens.
        drafted, accepted = np.nan_to_num(drafted), np.nan_to_num(accepted)
        decode = tokens - 1
        rate = ratio_of_sums(accepted, drafted)
        length = ratio_of_sums(decode, decode - accepted)
        source = TIMINGS
    else:
        chunks, first = _successful(samples, "chunks", ok), _successful(samples, "first_chunk_tokens", ok)
        rate, source = None, CHUNKS
        length = ratio_of_sums(tokens - first, chunks - 1)
    if rate is None and length is None:
        return None
    return {
        "rate": (rate or {}).get("value"),
        "rate_ci95": (rate or {}).get("ci95"),
        "mean_length": (length or {}).get("value"),
        "mean_length_ci95": (length or {}).get("ci95"),
        "requests": max((rate or {}).get("requests", 0), (length or {}).get("requests", 0)),
        "source": source,
    }
