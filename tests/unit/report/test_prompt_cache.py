"""The prompt cache in the report (``report.prompt_cache``) from hand-built steps: the cell beside a TTFT, the
headline's warning, and the mode in words."""

from locust_llm.report.prompt_cache import NOT_MEASURED_TEXT, cache_cell, cache_warnings, mode_text
from tests.unit.report.documents import step, summary, view

HIT = "61% of the requests were served from the prompt cache"


def cached(level: float, number: int, fraction: float | None, flag: str | None = None):
    cache = {"mode": "replayed", "cached_fraction": fraction, "source": "server's usage", "flag": flag}
    return step(level, number, prompt_cache=cache)


def test_the_cell_shows_the_share_and_its_source_or_why_it_is_missing():
    assert cache_cell(cached(1.0, 0, 0.25)) == {"value": "25.0%", "why": "from the server's usage", "flag": None}
    missing = cache_cell(cached(1.0, 0, None, flag=HIT))
    assert missing["value"] is None and missing["flag"] == HIT
    assert missing["why"].startswith(NOT_MEASURED_TEXT) and HIT in missing["why"]
    assert cache_cell(step(1.0))["why"] == NOT_MEASURED_TEXT  # a run recorded before the cache was measured


def test_one_warning_names_the_first_four_flagged_steps_and_counts_the_rest():
    steps = [cached(float(2**i), i, 0.6, flag=HIT if i != 1 else None) for i in range(7)]
    (warning,) = cache_warnings(view(summary({"base": steps})))
    assert warning.startswith("6 step(s) whose TTFT may be prompt-cache hits")
    assert warning.count(HIT) == 4 and warning.endswith("; and 2 more")
    assert "base @ 2 " not in warning  # the step without a flag
    assert cache_warnings(view(summary({"base": [cached(1.0, 0, 0.0)]}))) == []


def test_the_mode_in_words_names_the_marker_length_or_says_nothing_for_an_old_run():
    env = {"workload": {"prompt_cache": "cold", "unique_prefix_tokens": 12, "cache_salt": True}}
    text = mode_text(view(summary({"base": []}), env=env))
    assert text.startswith("cold:") and "12 tokens" in text and "cache_salt of its own" in text
    # A run that recorded no nonce sent the same bytes as every run before it.
    assert text.endswith("a server's cache from an earlier run can serve them")
    nonce = {"workload": {**env["workload"], "across_runs": "unique"}}
    assert mode_text(view(summary({"base": []}), env=nonce)).endswith("so no earlier run sent these prompts")
    assert mode_text(view(summary({"base": []}))) is None
