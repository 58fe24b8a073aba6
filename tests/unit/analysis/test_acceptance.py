"""Acceptance from the responses, one request as the unit: rate and tokens per target pass with intervals over
requests, on hand-built requests whose answers are worked out in the comments."""

import math

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.acceptance import CHUNKS, TIMINGS, ratio_of_sums, request_acceptance
from locust_llm.analysis.metrics import Chunks, chunk_split
from locust_llm.analysis.samples import LevelSamples


def level(**columns) -> LevelSamples:
    samples = LevelSamples()
    samples.add(0, "clean", [], np.ones(3), np.ones(3), pd.DataFrame(columns))
    return samples


def test_identical_requests_give_their_own_rate_and_length_with_no_spread():
    # 40 tokens, 16 drafted, 12 accepted each: rate 12/16; 39 tokens after the first over 39 - 12 = 27 passes.
    acc = request_acceptance(level(output_tokens=[40.0] * 30, draft_n=[16.0] * 30, draft_accepted=[12.0] * 30))
    assert acc["source"] == TIMINGS and acc["requests"] == 30
    assert acc["rate"] == pytest.approx(0.75) and acc["rate_ci95"] == pytest.approx([0.75, 0.75])
    assert acc["mean_length"] == pytest.approx(39 / 27) and acc["mean_length_ci95"] == pytest.approx([39 / 27] * 2)


def test_the_interval_follows_the_spread_between_requests_not_the_token_count():
    # 400 requests of 16 drafted tokens, half accepting 4 and half 12: rate 0.5. Resampling requests, the ratio's
    # standard error is sd(a - 0.5 d) / (sqrt(400) x 16) = 4 / 320 = 0.0125, so the 95% interval is about
    # 0.5 -+ 0.0245, twice as wide as a binomial interval over the 6400 tokens (-+ 0.0122) would claim.
    accepted = [4.0, 12.0] * 200
    acc = request_acceptance(level(output_tokens=[40.0] * 400, draft_n=[16.0] * 400, draft_accepted=accepted))
    assert acc["rate"] == pytest.approx(0.5)
    lo, hi = acc["rate_ci95"]
    assert lo == pytest.approx(0.5 - 0.0245, abs=0.004) and hi == pytest.approx(0.5 + 0.0245, abs=0.004)
    assert hi - lo > 1.5 * 2 * 1.96 * math.sqrt(0.25 / 6400)
    # Tokens per pass: 400 x 39 / (200 x 35 + 200 x 27) = 15600 / 12400; residuals 39 - R p are -+5.03 around
    # a mean of 31 passes: standard error 5.03 / (20 x 31) = 0.0081, so about -+ 0.0159.
    length = 15600 / 12400
    assert acc["mean_length"] == pytest.approx(length)
    lo, hi = acc["mean_length_ci95"]
    assert lo == pytest.approx(length - 0.0159, abs=0.004) and hi == pytest.approx(length + 0.0159, abs=0.004)


def test_a_response_without_draft_counts_drafted_nothing_and_failures_do_not_count():
    # llama.cpp leaves draft_* out when a request drafted nothing: one token per pass. A failed request (no
    # token count) is left out altogether. Rate 12/16; tokens per pass (39 + 39) / (27 + 39).
    acc = request_acceptance(
        level(output_tokens=[40.0, 40.0, np.nan], draft_n=[16.0, np.nan, np.nan], draft_accepted=[12.0, np.nan, np.nan])
    )
    assert acc["requests"] == 2 and acc["rate"] == pytest.approx(0.75)
    assert acc["mean_length"] == pytest.approx(78 / 66)


def test_without_timings_tokens_per_pass_come_from_chunks_after_the_first():
    # One chunk per engine step: a 1-token first chunk (the prefill's), then 3 chunks of 3 tokens and 2 of 2
    # tokens: 13 tokens after the first over 5 chunks.
    acc = request_acceptance(level(output_tokens=[10.0, 5.0], chunks=[4.0, 3.0], first_chunk_tokens=[1.0, 1.0]))
    assert acc["source"] == CHUNKS and acc["rate"] is None and acc["rate_ci95"] is None
    assert acc["mean_length"] == pytest.approx(13 / 5)
    # No timings and no exact chunk split: nothing to say.
    assert request_acceptance(level(output_tokens=[10.0], chunks=[np.nan], first_chunk_tokens=[np.nan])) is None


def test_chunk_split_counts_chunks_per_request_and_drops_approximate_splits():
    rows = pd.DataFrame({"token_source": ["usage_deltas", "usage+text_share", "usage_deltas"]}, index=[10, 11, 12])
    chunks = Chunks(
        lengths=np.array([2, 3, 1]),
        offset=np.zeros(6, dtype=np.float32),
        tokens=np.array([1, 3, 1, 2, 2, 4], dtype=np.int32),
    )
    split = chunk_split(rows, chunks)
    assert list(split.index) == [10, 11, 12]
    assert split["chunks"].tolist()[::2] == [2.0, 1.0] and np.isnan(split.loc[11, "chunks"])
    assert split["first_chunk_tokens"].tolist()[::2] == [1.0, 4.0] and np.isnan(split.loc[11, "first_chunk_tokens"])


def test_ratio_of_sums_needs_two_rows_for_an_interval_and_a_positive_denominator():
    assert ratio_of_sums(np.array([3.0]), np.array([4.0])) == {"value": 0.75, "ci95": None, "requests": 1}
    assert ratio_of_sums(np.array([0.0, 0.0]), np.array([0.0, 0.0])) is None
