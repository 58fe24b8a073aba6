"""The reference server's prompt cache (the oracle of the cache measurements) and each engine's counters read through
the telemetry maps: the fraction the analysis computes from a window's counter deltas is the cache's own truth."""

import locust  # noqa: F401, I001  (gevent patching first; the telemetry modules import requests)

import pandas as pd
import pytest

from locust_llm.analysis.server_metrics import server_figures
from locust_llm.rundir.steps import StepRow
from locust_llm.rundir.telemetry_meta import TelemetryMeta
from locust_llm.telemetry.maps import map_for
from locust_llm.telemetry.parse import parse_text
from locust_llm.refserver.cache import METRIC_STYLES, PrefixCache


def words(n: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + n))


def test_hits_are_whole_leading_blocks_and_never_the_last_token():
    cache = PrefixCache(block=4)
    assert cache.admit(words(10)) == 0  # cold: nothing cached, its two full blocks enter
    assert cache.admit(words(10)) == 8  # both blocks again; the last two tokens are computed
    assert cache.admit(words(8)) == 4  # 8 tokens: at most 7 cached, whole blocks only
    assert cache.admit(words(4) + " x " + words(5, 4)) == 4  # the second block differs: the chain stops there
    assert cache.admit(words(10), salt="tenant-b") == 0  # another salt shares nothing
    assert cache.admit(words(10), salt="tenant-b") == 8
    assert (cache.prompt_tokens, cache.cached_tokens) == (10 + 10 + 8 + 10 + 10 + 10, 8 + 4 + 4 + 8)


def test_the_least_recently_used_blocks_are_forgotten_and_a_zero_block_size_turns_the_cache_off():
    cache = PrefixCache(block=2, capacity=3)
    cache.admit(words(5))  # blocks A B
    cache.admit(words(5, 100))  # blocks C D: A is forgotten (capacity 3)
    assert cache.admit(words(5)) == 0  # A missing: the chain has no start
    off = PrefixCache(block=0)
    assert off.admit(words(9)) == off.admit(words(9)) == 0 and not off.enabled
    with pytest.raises(ValueError, match="metrics style"):
        PrefixCache(style="tgi")


@pytest.mark.parametrize("style", METRIC_STYLES)
def test_each_engines_counters_give_the_caches_own_fraction(style):
    """The page at two instants, read as the poller reads it (the engine's map), through the step figures: the
    window's cached fraction equals cached / prompt tokens admitted between them, for every engine's names."""
    cache = PrefixCache(block=4, style=style)
    rows = []

    def scrape(t: float) -> None:
        metric_map = map_for(style)
        for r in metric_map.normalise(parse_text(cache.metrics_text("m"), wanted=metric_map.wants)):
            rows.append(
                {
                    "t": t,
                    "variant": "v",
                    "source": "scrape",
                    "metric": r.metric,
                    "labels": r.labels_json(),
                    "value": r.value,
                }
            )

    cache.admit(words(40))  # before the window
    scrape(100.0)
    prompt0, cached0 = cache.prompt_tokens, cache.cached_tokens
    for k in range(6):
        cache.admit(words(40) if k % 2 else words(40, 1000 * (k + 1)))
    scrape(110.0)
    truth = (cache.cached_tokens - cached0) / (cache.prompt_tokens - prompt0)
    assert 0.3 < truth < 0.6
    meta = TelemetryMeta.model_validate(
        {"interval_s": 5.0, "timeout_s": 1.0, "gaps": [], "attachments": [{"variant": "v", "engine": style}]}
    )
    window = StepRow(variant="v", step=0, level=1, mode="closed", t_start=99.0, t_steady=100.0, t_end=110.0)
    step = server_figures(pd.DataFrame(rows), meta, [window])["variants"]["v"]["steps"][0]
    assert step["prompt_cache"]["cached_fraction"] == pytest.approx(truth)
    assert step["prompt_cache"]["prompt_tokens"] == cache.prompt_tokens - prompt0
