"""The report's fixed prose: metric definitions, the rules behind each mark, the exit codes in words.

Thresholds are the analysis's own constants, so the words cannot drift from what is computed.
"""

from __future__ import annotations

from ..analysis.curves import SATURATION_MIN_GAIN
from ..analysis.prompt_cache import CACHED_SHARE, LEVEL_GAP
from ..analysis.steady import DRIFT_TOLERANCE
from ..analysis.summary import KNEE_THRESHOLD
from ..analysis.validity import ACHIEVED_FRACTION_MIN, CPU_PERCENT_MAX, LOOP_LAG_MS_MAX, SCHEDULE_LAG_MS_MAX

__all__ = ["DEFINITIONS", "EXIT_MEANINGS", "RULES"]

EXIT_MEANINGS = {
    0: "all gates hold",
    2: "bad input",
    3: "an SLO or quality gate failed",
    4: "regression beyond the threshold",
    5: "invalid run",
    6: "a server failed",
    7: "interrupted (SIGTERM or Ctrl-C), or not finished",
}

DEFINITIONS: list[tuple[str, str]] = [
    (
        "clock",
        (
            "All times are the client's perf_counter, anchored once per process to the epoch, so every "
            "process and the telemetry share one clock. Per request: t_intended (open loop: the scheduled "
            "arrival), t_send, t_first (first chunk carrying a token), t_end (last token)."
        ),
    ),
    ("TTFT", "Time to first token: t_first \u2212 t_send."),
    (
        "TTFT_sched",
        (
            "Open loop only: t_first \u2212 t_intended. The headline latency there, because a request "
            "sent late by a busy client has waited too, and that wait must not disappear."
        ),
    ),
    ("TPOT", "Time per output token after the first: (t_end \u2212 t_first) / (tokens \u2212 1), per request."),
    (
        "ITL",
        (
            "Inter-token latency, per token: each gap between chunks is divided evenly over the tokens of the "
            "later chunk (speculative decoding delivers several per chunk); first-chunk tokens have no gap."
        ),
    ),
    ("ICL", "Inter-chunk latency: the gaps between chunks themselves, reported separately from ITL."),
    ("E2E", "End to end: t_end \u2212 t_send (open loop also from t_intended)."),
    (
        "decode tok/s",
        ("Per request: (tokens \u2212 1) / (t_end \u2212 t_first); the speed one user sees while tokens stream."),
    ),
    (
        "aggregate output tok/s",
        (
            "Per step: every token whose arrival time falls inside the step's steady window, "
            "divided by the window's length (not tokens of the requests that happened to "
            "finish in it). The 95% CI is a bootstrap over one-second bins."
        ),
    ),
    (
        "goodput",
        (
            "Requests per second, sent in the steady window, that succeeded and met every SLO that is set. "
            "Failed and timed-out requests count against it."
        ),
    ),
    (
        "error rate",
        ("Failed requests / requests sent in the steady window. Failures are never dropped from any denominator."),
    ),
    (
        "token counts",
        (
            "Exact, from the server's usage deltas, token ids or per-token events (the source is "
            "recorded per request); SSE events are never counted as tokens."
        ),
    ),
    (
        "acceptance (server)",
        (
            "From the server's counters over the steady window: accepted / drafted tokens; mean "
            "acceptance length = 1 + accepted / drafts; per position i: accepted at i / drafts."
        ),
    ),
    (
        "acceptance (client)",
        (
            "Cross-check from what the client received: accepted / drafted tokens from each "
            "response's timings, and tokens per token-carrying chunk."
        ),
    ),
    (
        "speed-up",
        (
            "metric(variant, level) / metric(baseline, level), oriented so that > 1 favours the variant "
            "(baseline / variant for latencies), with a percentile-bootstrap 95% CI resampling both sides."
        ),
    ),
    ("crossover", "The first level whose speed-up CI upper bound is below 1: from there the variant is slower."),
    (
        "prompt cached",
        (
            "Cached prompt tokens / prompt tokens of the step's successful steady requests, as the responses say "
            "(llama.cpp timings.cache_n, OpenAI usage.prompt_tokens_details.cached_tokens), else as the server's "
            "cache counters say over the window. By default every prompt starts with a unique marker of a few "
            "tokens, so no request repeats a prompt its server has seen and TTFT is prefill."
        ),
    ),
    (
        "percentiles",
        (
            "P50/P95/P99 as numpy's linear percentile over the requests (or tokens) of the step's steady "
            "window; requests belong to a step by their send time."
        ),
    ),
]

RULES: list[tuple[str, str]] = [
    ("warm-up", "Each step's first seconds are recorded but excluded from every figure."),
    (
        "prompt cache",
        (
            f"A step with unique prompts and more than {CACHED_SHARE:.0%} of its prompt tokens cached is flagged, as "
            "is every step of a run that replayed its prompts; so is a compared level whose variants' cached shares "
            f"differ by more than {100 * LEVEL_GAP:.0f} points, and its latency speed-ups carry the flag."
        ),
    ),
    (
        "saturation",
        (
            f"The first level that no higher level beats by more than {SATURATION_MIN_GAIN:.0%} with "
            "non-overlapping 95% CIs; the top level is never the answer (nothing above it to show the "
            "plateau)."
        ),
    ),
    (
        "knee",
        (
            "The last level before P95 TPOT or TTFT grows faster than load on a log-log scale (slope > "
            f"{KNEE_THRESHOLD['closed']:g} in a closed loop, where past saturation latency grows in proportion "
            f"to users; > {KNEE_THRESHOLD['open']:g} in an open loop)."
        ),
    ),
    (
        "steady",
        (
            "A step is unsteady when throughput (1 s bins) or TPOT drifts within the steady window: the "
            f"trend's 95% CI excludes 0 and it moves the metric by {DRIFT_TOLERANCE:.0%} or more of its mean "
            "over the window."
        ),
    ),
    (
        "client validity",
        (
            f"A step is invalid when a load process averaged more than {CPU_PERCENT_MAX:.0f}% of a "
            f"core, the P95 of the event-loop lag exceeded {LOOP_LAG_MS_MAX:.0f} ms, or (open loop) "
            f"the P99 schedule lag exceeded {SCHEDULE_LAG_MS_MAX:.0f} ms, arrivals were dropped at "
            f"the in-flight cap, or fewer than {ACHIEVED_FRACTION_MIN:.0%} of scheduled arrivals "
            "were sent."
        ),
    ),
    (
        "consistency",
        (
            "Under greedy decoding lossless speculative decoding must reproduce the baseline's output "
            "token for token on fixed prompts; the first divergence per prompt is shown, and any "
            "divergence is a defect."
        ),
    ),
]
