"""The poller against live endpoints: a metrics page that breaks and dies, the real CPU llama.cpp server with
speculation (direct /metrics scrape and through a real Prometheus)."""

import locust  # noqa: F401, I001  (gevent patching first)

import itertools
import json
import logging
import os
import time
from pathlib import Path

import gevent
import gevent.pool
import pandas as pd
import pytest
import requests
from gevent.pywsgi import WSGIServer

from locust_llm.analysis.server_metrics import server_figures
from locust_llm.records import now
from locust_llm.rundir import load_run
from locust_llm.rundir.steps import StepRow
from locust_llm.scenario import load_scenario
from locust_llm.servers import launch_variant
from locust_llm.telemetry.maps import map_for
from locust_llm.telemetry.parse import parse_text
from locust_llm.telemetry.poller import TelemetryPoller
from tests.helpers import REPO, require_llama_server

PAGES = REPO / "tests" / "fixtures" / "metrics"
SCENARIO = REPO / "scenarios" / "tiny-cpu-test.yaml"


# -- a metrics endpoint that misbehaves, then dies ------------------------------------------------
class FlakyMetrics:
    """Serves tests/fixtures/metrics/vllm-<page>.txt; ``mode`` switches to garbage or a slow answer."""

    def __init__(self):
        self.mode = "ok"
        self.page = 0
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None, error_log=None)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ, start_response):
        if self.mode == "garbage":
            start_response("200 OK", [("Content-Type", "text/html"), ("Connection", "close")])
            return [b"<!DOCTYPE html><html><body>upstream error</body></html>"]
        if self.mode == "slow":
            gevent.sleep(2.0)
        # Connection: close, so that once the server stops no kept-alive connection outlives it.
        start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4"), ("Connection", "close")])
        return [(PAGES / f"vllm-{self.page}.txt").read_bytes()]

    def stop(self):
        self.server.stop(timeout=0)


def test_endpoint_that_breaks_and_dies_leaves_gaps_and_missing_figures(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="locust_llm.telemetry.poller")
    endpoint = FlakyMetrics()
    poller = TelemetryPoller(tmp_path, interval_s=0.2)
    try:
        poller.attach("v", "vllm", endpoint.url, server_pid=os.getpid())
        phase = 0.7
        gevent.sleep(phase)
        t_start = now()
        endpoint.mode = "garbage"
        gevent.sleep(phase)
        endpoint.mode, endpoint.page = "ok", 1
        gevent.sleep(phase)
        endpoint.mode = "slow"
        gevent.sleep(phase)
        endpoint.mode, endpoint.page = "ok", 2
        gevent.sleep(phase)
        t_alive = now()
        endpoint.stop()
        t_dead = now()
        gevent.sleep(3 * phase)
        t_end = now()
        poller.detach()
    finally:
        poller.close()
        endpoint.stop()

    run = load_run(tmp_path)
    frame, meta = run.telemetry, run.telemetry_meta
    assert not (tmp_path / "telemetry.parts").exists()
    gaps = meta.gaps
    assert [g.source for g in gaps] == ["scrape"] * 3
    garbage, slow, dead = gaps
    assert "not Prometheus text" in garbage.error and garbage.recovered is True
    # A gap runs from the last good sample to the next one; the first failure lies inside it.
    assert garbage.start < t_start <= garbage.first_failure < garbage.end
    assert "unreachable" in slow.error or "no answer" in slow.error
    assert slow.recovered is True
    assert dead.recovered is False and dead.start <= t_dead and dead.end >= t_end - 0.5
    # One warning for the source however many polls failed; the polling went on (process rows after death).
    warnings = [r for r in caplog.records if "v/scrape failed" in r.getMessage()]
    assert len(warnings) == 1
    process_after = frame[(frame["source"] == "process") & (frame["t"] > t_dead + 0.2)]
    assert len(process_after) >= 3
    assert meta.attachments[0].sources[0].failures >= 5

    windows = [
        StepRow(
            variant="v", step=0, level=1, mode="closed", t_start=t_start - 1, t_steady=t_start - 0.3, t_end=t_alive
        ),
        StepRow(variant="v", step=1, level=2, mode="closed", t_start=t_start - 1, t_steady=t_start - 0.3, t_end=t_end),
    ]
    steps = server_figures(frame, meta, windows)["variants"]["v"]["steps"]
    alive, died = steps
    assert alive["acceptance"]["drafts"] == 1000 and alive["acceptance"]["rate"] == pytest.approx(1900 / 3000)
    assert {g["source"] for g in alive["gaps"]} == {"scrape"}
    assert died["acceptance"]["rate"] is None
    reasons = {m["figure"]: m["reason"] for m in died["missing"]}
    assert "window end" in reasons["acceptance.rate"] and "telemetry gap" in reasons["acceptance.rate"]
    assert any(p["metric"] == "requests_running" and p["coverage"] < 1 for p in died["partial"])


# -- the real llama.cpp server with speculation -------------------------------------------------
PROMPTS = [
    "the rest of the day",
    "once upon a time there",
    "bo zi wa fi la",
    "a b c d e f",
    "in the beginning",
    "zu ka lo mi",
    "the quick brown fox",
    "it was the best of times",
    "la la la",
    "numbers 1 2 3 4",
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    require_llama_server()
    scenario = load_scenario(SCENARIO)
    with launch_variant(scenario, "spec-k4", log_dir=tmp_path_factory.mktemp("llama")) as server:
        yield server


def spec_counters(base_url: str) -> dict[str, float]:
    """The counters' own values, read straight off the page."""
    text = requests.get(f"{base_url}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for reading in map_for("llamacpp").normalise(parse_text(text)):
        if reading.metric in ("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens"):
            out[reading.metric] = reading.value
    return out


def send_batch(base_url: str, n: int = 20, concurrency: int = 4) -> list[dict]:
    def one(i: int) -> dict:
        body = {"prompt": f"{PROMPTS[i % len(PROMPTS)]} {i}", "n_predict": 32, "temperature": 0, "ignore_eos": True}
        answer = requests.post(f"{base_url}/completion", json=body, timeout=60)
        answer.raise_for_status()
        return answer.json()["timings"]

    return list(gevent.pool.Pool(concurrency).imap(one, range(n)))


def measure(poller: TelemetryPoller, base_url: str, idle_s: float) -> tuple[StepRow, list[dict], dict, dict]:
    """Idle, a bounded batch, idle: the window's edges fall in quiet time, so it covers the whole batch."""
    gevent.sleep(idle_s)
    before = spec_counters(base_url)
    t_steady = now()
    gevent.sleep(idle_s)
    timings = send_batch(base_url)
    gevent.sleep(idle_s)
    t_end = now()
    after = spec_counters(base_url)
    gevent.sleep(idle_s)
    poller.detach()
    poller.close()
    window = StepRow(
        variant="spec-k4", step=0, level=4, mode="closed", t_start=t_steady, t_steady=t_steady, t_end=t_end
    )
    return window, timings, before, after


def check_figures(run_dir: Path, window: StepRow, timings: list[dict], before: dict, after: dict) -> dict:
    run = load_run(run_dir)
    frame, meta = run.telemetry, run.telemetry_meta
    step = server_figures(frame, meta, [window])["variants"]["spec-k4"]["steps"][0]
    acc = step["acceptance"]
    assert acc is not None and acc["source"] == "server", step["missing"]
    assert all(t.get("draft_n", 0) > 0 for t in timings), "speculation did not engage"
    client_rate = sum(t["draft_n_accepted"] for t in timings) / sum(t["draft_n"] for t in timings)
    assert acc["rate"] is not None and abs(acc["rate"] - client_rate) <= 0.02, (acc, client_rate, step["missing"])
    own_length = 1 + (after["spec_accepted_tokens"] - before["spec_accepted_tokens"]) / (
        after["spec_drafts"] - before["spec_drafts"]
    )
    assert abs(acc["mean_length"] - own_length) <= 0.02, (acc, own_length)
    per_pos = acc["per_position"]
    assert per_pos is not None, step["missing"]
    assert acc["positions"] == ["0", "1", "2", "3"] and len(per_pos) == 4
    assert all(0 <= p <= 1 for p in per_pos)
    assert all(later <= earlier + 1e-9 for earlier, later in itertools.pairwise(per_pos)), per_pos
    assert sum(per_pos) == pytest.approx(acc["mean_length"] - 1)  # Σ per-position = accepted / drafts
    assert step["requests_running"]["max"] >= 0
    return step


@pytest.mark.server
def test_llamacpp_acceptance_from_metrics_deltas_matches_the_requests(llama, tmp_path):
    poller = TelemetryPoller(tmp_path, interval_s=0.5)
    poller.attach("spec-k4", "llamacpp", llama.base_url, server_pid=llama.proc.pid)
    window, timings, before, after = measure(poller, llama.base_url, idle_s=0.7)
    step = check_figures(tmp_path, window, timings, before, after)
    # The web UI's live figure over the whole batch: the server's counters differenced, as the requests saw it.
    live = poller.live_figures("spec-k4", window_s=3600)["acceptance"]
    client_rate = sum(t["draft_n_accepted"] for t in timings) / sum(t["draft_n"] for t in timings)
    assert live is not None and abs(live - client_rate) <= 0.02, (live, client_rate)
    assert step["sources"] == ["process", "scrape"]
    assert step["process"]["rss_mib"]["max"] > 10 and step["process"]["cpu_cores"]["max"] > 0
    if not json.loads((tmp_path / "telemetry.json").read_text())["gpu_available"]:
        assert "gpu" in {m["figure"] for m in step["missing"]}
    assert step["gaps"] == []


@pytest.mark.server
def test_llamacpp_acceptance_through_a_real_prometheus(llama, tmp_path):
    from locust_llm.telemetry.prometheus_server import PrometheusServer, prometheus_binary

    if not prometheus_binary():
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; CI must install Debian's prometheus package (.ci/run)")
        pytest.skip("prometheus not on PATH (Debian: apt-get install prometheus)")
    with PrometheusServer(scrape_interval_s=0.5, log_path=tmp_path / "prometheus.log") as prom:
        prom.add_server("spec-k4", llama.base_url)
        assert prom.wait_for_target("spec-k4", timeout_s=20), prom.log_tail()
        poller = TelemetryPoller(tmp_path, interval_s=0.5)
        poller.attach(
            "spec-k4",
            "llamacpp",
            llama.base_url,
            server_pid=llama.proc.pid,
            prometheus_url=prom.url,
            prometheus_selector=prom.selector("spec-k4"),
        )
        window, timings, before, after = measure(poller, llama.base_url, idle_s=1.2)
        workdir = prom.workdir
    assert prom.proc is None and not workdir.exists()
    step = check_figures(tmp_path, window, timings, before, after)
    assert "prometheus" in step["sources"] and "scrape" not in step["sources"]
    frame = pd.read_parquet(tmp_path / "telemetry.parquet")
    labels = json.loads(frame[frame["source"] == "prometheus"]["labels"].iloc[0])
    assert labels["locust_llm_variant"] == "spec-k4"


def test_prometheus_server_stops_cleanly_without_orphans(tmp_path):
    from locust_llm.telemetry.prometheus_server import PrometheusServer, prometheus_binary

    if not prometheus_binary():
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; CI must install Debian's prometheus package (.ci/run)")
        pytest.skip("prometheus not on PATH")
    prom = PrometheusServer(dcgm_url="http://127.0.0.1:9/metrics").start()
    pid = prom.proc.pid
    config = json.loads((prom.workdir / "config.yml").read_text())
    assert [c["job_name"] for c in config["scrape_configs"]] == ["llm-server", "dcgm"]
    assert requests.get(f"{prom.url}/-/ready", timeout=5).status_code == 200
    prom.stop()
    prom.stop()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- a page that lies about its clock, its size or its series ----------------------------------------------------


class OnePage:
    """Serves ``page`` (bytes) at /metrics."""

    def __init__(self, page: bytes):
        self.page = page
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None, error_log=None)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4"), ("Connection", "close")])
        return [self.page]

    def stop(self):
        self.server.stop(timeout=0)


def test_exposition_timestamps_from_another_clock_are_not_sample_times_and_are_said_once():
    """Samples stamped an hour behind (milliseconds, as the format has them): the rows carry the poll's time, and the
    skew is noted once with the raw value (a page stamped a few seconds off is not)."""
    from locust_llm.telemetry.sources import ScrapeSource

    behind_ms = int((time.time() - 3600) * 1000)
    endpoint = OnePage(f"vllm:spec_decode_num_drafts_total 10 {behind_ms}\n".encode())
    notes = []
    source = ScrapeSource("scrape", f"{endpoint.url}/metrics", map_for("vllm"), 2.0, lambda *note: notes.append(note))
    try:
        rows = source.poll()
        source.poll()
        endpoint.page = f"vllm:spec_decode_num_drafts_total 10 {int((time.time() - 5) * 1000)}\n".encode()
        quiet = ScrapeSource("scrape", f"{endpoint.url}/metrics", map_for("vllm"), 2.0, lambda *n: notes.append(n))
        quiet.poll()
        quiet.close()
    finally:
        source.close()
        endpoint.stop()
    assert [(r[0], r[1], r[3]) for r in rows] == [(None, "spec_drafts", 10.0)]  # None: the poller stamps it
    ((kind, message),) = notes
    assert kind == "far_timestamps"
    assert f"vllm:spec_decode_num_drafts_total stamped {behind_ms / 1000!r}, -360" in message, message


@pytest.mark.parametrize("stamp", ["NaN", "1e300"])
def test_a_timestamp_that_is_no_time_at_all_is_noted_too(stamp):
    from locust_llm.telemetry.sources import ScrapeSource

    endpoint = OnePage(f"vllm:spec_decode_num_drafts_total 10 {stamp}\n".encode())
    notes = []
    source = ScrapeSource("scrape", f"{endpoint.url}/metrics", map_for("vllm"), 2.0, lambda *note: notes.append(note))
    try:
        rows = source.poll()
    finally:
        source.close()
        endpoint.stop()
    assert [(r[0], r[1], r[3]) for r in rows] == [(None, "spec_drafts", 10.0)]
    ((kind, message),) = notes
    assert kind == "far_timestamps" and "vllm:spec_decode_num_drafts_total stamped" in message, message


@pytest.mark.parametrize(
    "page, words",
    [
        (b"vllm:num_requests_running 1\n" + b"# " + b"x" * 200 + b"\n" * 50_000, "larger than 8 MiB (the cap)"),
        (
            "".join(f'vllm:num_requests_running{{engine="{i}"}} 1\n' for i in range(5000)).encode(),
            "5,000 samples of the metrics read (most: vllm:num_requests_running, 5,000), more than the 4,096",
        ),
    ],
    ids=["50-MB", "5000-series"],
)
def test_a_page_over_the_caps_is_a_named_failure_not_read(page, words):
    from locust_llm.telemetry.sources import ScrapeSource, SourceError

    if words.startswith("larger"):
        page = page * 1000  # 50 MB and more
    endpoint = OnePage(page)
    source = ScrapeSource("scrape", f"{endpoint.url}/metrics", map_for("vllm"), 5.0)
    try:
        with pytest.raises(SourceError, match=words.replace("(", r"\(").replace(")", r"\)")):
            source.poll()
    finally:
        source.close()
        endpoint.stop()


def test_a_refused_page_is_a_failure_with_its_text_escaped_and_nothing_printed(capfd):
    """A metric name holding escapes: the poll fails naming the line; the parsing thread prints nothing."""
    from locust_llm.telemetry.sources import ScrapeSource, SourceError

    endpoint = OnePage(b"vllm:num_requests_running\x1b]0;t\x07\x1b[2J 1\n")
    source = ScrapeSource("scrape", f"{endpoint.url}/metrics", map_for("vllm"), 5.0)
    try:
        with pytest.raises(SourceError, match="invalid metric name") as caught:
            source.poll()
    finally:
        source.close()
        endpoint.stop()
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err and "MetricsParseError" not in err, err
    assert "(line 1: 'vllm:num_requests_running\\x1b]0;t" in str(caught.value)
