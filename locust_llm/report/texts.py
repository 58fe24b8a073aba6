"""The report's fixed prose: metric definitions and the rules behind each mark (the exit codes in words are
``analysis.gates.EXIT_MEANINGS``).

Thresholds are the analysis's own constants, so the words cannot drift from what is computed. docs/metrics.md
("Metric definitions") shows ``DEFINITIONS`` word for word; ``tests/unit/test_docs.py`` checks it.
"""

from __future__ import annotations

from ..analysis.curves import KNEE_ELASTICITY, SATURATION_MIN_GAIN
from ..analysis.prompt_cache import CACHED_SHARE, LEVEL_GAP
from ..analysis.steady import DRIFT_TOLERANCE
from ..analysis.summary import KNEE_THRESHOLD
from ..analysis.validity import (
    ACHIEVED_FRACTION_MIN,
    CLIENT_SHARE_MAX,
    CPU_PERCENT_MAX,
    LOOP_LAG_MS_MAX,
    SCHEDULE_LAG_MS_MAX,
)

__all__ = ["DEFINITIONS", "RULES"]

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
            "Per step, a renewal-reward ratio (`analysis/cycles.py`). Closed loop: each user's requests make "
            "*request cycles*, from one send to the same user's next send (a conversation's turns are one cycle), "
            "each earning its request's output tokens (0 when it failed); the figure is the tokens of the cycles "
            "that start in the steady window over their time per user (`users × Σ tokens / Σ durations`; a cycle "
            "with no next send in the step lasts until its request was done). Open loop, and runs that recorded "
            "no `user`: the tokens of the requests sent in the window over its length. Either way a request "
            "counts, all its tokens, in the step that sent it, as in `output_tokens`: `output_tokens / "
            "throughput.covered_s` is `output_tps`. The 95% CI comes from 5 to 10 consecutive time batches "
            "(closed loop: at least 2 cycles per user each; otherwise at least max(2 s, 2 × P95 E2E)): the "
            "delta-method variance of a ratio of batch totals, `k/(k−1) · Σ(R_j − value·T_j)² / (ΣT)²`, drawn on "
            "the log scale (`value · exp(±t_{k−1} · se/value)`), so it is never negative. With fewer than 5 "
            'batches there is none: `throughput.note` says "too short: no interval" (the runtime extends a '
            "closed-loop step until it holds 10 cycles per user, within `load.max_extend_s`). Calibration below."
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
            "metric(variant, level) / metric(baseline, level), oriented so that > 1 favours the variant (baseline "
            "/ variant for latencies). Its 95% CI: for closed-loop aggregate tok/s a t interval of the log ratio "
            "of the two sides' throughputs, each with the standard error of its logarithm from its batches "
            "(above; blocks of an interleaved run paired and pooled with random-effects weights, Cochran's Q for "
            "their agreement); for goodput (and runs without users) the log ratio of the steady windows' "
            "per-second means (AR(1)-aware); for per-request figures a percentile bootstrap over request pairs "
            "(request k had the same prompt in both variants), or over each side on its own where the requests "
            "cannot be paired."
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
            "The first level whose throughput gain to every higher level has a 95% upper bound below "
            f"+{SATURATION_MIN_GAIN:.0%} (never decided from overlapping intervals); otherwise not reached within "
            "the ladder, with the last segment's gain and its interval."
        ),
    ),
    (
        "knee",
        (
            "Closed loop: the first level whose next segment's throughput elasticity (log-log slope of throughput "
            f"against users) has a 95% upper bound below {KNEE_ELASTICITY:g}: past it more than half of each added "
            "user's time goes into waiting. Open loop: the last level before P95 TPOT or TTFT grows faster than the "
            f"offered rate (log-log slope > {KNEE_THRESHOLD['open']:g}; no interval)."
        ),
    ),
    (
        "steady",
        (
            "An equivalence test: a step is steady when the 95% CI of its drift across the window lies inside "
            f"+-{DRIFT_TOLERANCE:.0%} of the mean, unsteady when the CI excludes no drift and is not inside, and too "
            "noisy when the CI holds 0 but reaches past the margin (left out of verdicts like unsteady: a longer step "
            "can tell). Closed loop: the throughput decides, over request-cycle batches; open loop, where the offered "
            "rate sets throughput: the E2E from the intended send (per request) and the requests in flight (1 s "
            "bins). The CI respects the correlation between neighbouring points (AR(1)). TPOT's drift is shown, "
            "never decides."
        ),
    ),
    (
        "client validity",
        (
            "Judged per figure. A client stall delays the stamps taken during it by at most the worst event-loop "
            "lag of that second (and, open loop, a request's schedule lag is the client's own lateness): each "
            "latency figure's bound is how far its value without those delays can lie from the measured one, and "
            f"it is marked when the client could account for more than {CLIENT_SHARE_MAX:.0%} of it (the strict "
            f"limits, loop lag P95 {LOOP_LAG_MS_MAX:.0f} ms and schedule lag P99 {SCHEDULE_LAG_MS_MAX:.0f} ms, "
            "are said beside it). A step is client-invalid, and left out of every verdict, only for what spoils "
            f"its throughput: a load process above {CPU_PERCENT_MAX:.0f}% of a core; closed loop, users spending "
            f"more than {CLIENT_SHARE_MAX:.0%} of each request cycle waiting on the client; open loop, arrivals "
            f"dropped at the in-flight cap or fewer than {ACHIEVED_FRACTION_MIN:.0%} of them sent. A level's "
            "speed-ups are widened by both sides' bounds; a level whose verdict would change within them is "
            "client-invalid, any other keeps its verdict."
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
