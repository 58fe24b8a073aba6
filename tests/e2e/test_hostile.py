"""Hostile inputs, round two, each as a real headless run against a small misbehaving server on loopback (the
reference server, or a misbehaving front of it: ``tests.misbehaving``): the documented exit code, the message,
and ``requests.parquet`` holding exactly the requests Locust counted (docs/faults-and-probes.md, "Faults and bad
input").

A refusing server must not be asked thousands of times a second: where every request fails at once, the rows are
bounded by the backoff schedule over the run's own measured duration (``backoff_bound``), not by a tuned number.
"""

import json
import os
import signal
import subprocess
import sys
import time

import certifi
import pandas as pd
import pytest

from locust_llm.client.tokenizer import ServerTokenizer
from locust_llm.records import FAST_FAIL_S, NEVER_REACHED
from locust_llm.rundir import load_run
from locust_llm.runtime.users import BACKOFF_FIRST_S, BACKOFF_MAX_S, USAGE_CHECKS_PER_STEP
from locust_llm.workload.generate import WORDS
from tests.e2e.test_faults import counted
from tests.e2e.test_webui import free_port
from tests.helpers import LOCUSTFILE, REPO, assert_run_completed, run_locust, terminate
from tests.misbehaving import Front, make_certs

SCENARIO = """
name: hostile
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  ladder: [2]
  step_duration_s: 2
  warmup_s: 0.5
  prompt_tokens: 16
  max_tokens: 8
"""
USERS = 2  # the SCENARIO's ladder
QUICK = ("--ttft-s", "0.005", "--gap-s", "0.002")
# Where a run must pass (exit 0), a server slow enough that the client's own ~1 ms per request stays far below the
# 5% of each request cycle that makes a step client-invalid.
CALM = ("--ttft-s", "0.02", "--gap-s", "0.01")


def run(tmp_path, host: str, *args: str, env: dict | None = None, scenario: str = SCENARIO):
    path = tmp_path / "hostile.yaml"
    path.write_text(scenario)
    done = run_locust(tmp_path, "--json", "--host", host, "--scenario", str(path), "--run-id", "h", *args, env=env)
    rows = tmp_path / "h" / "requests.parquet"
    return done, pd.read_parquet(rows) if rows.exists() else None


def backoff_bound(frame: pd.DataFrame) -> int:
    """The most requests ``USERS`` closed-loop users can send in the rows' time span when each waits 50 ms after
    its first instant failure, doubling up to 1 s; each failure that was not instant restarts the doubling."""
    start = frame["t_connect"].fillna(frame["t_send"]).fillna(frame["t_done"])
    span = float(frame["t_done"].max() - start.min())
    waits, elapsed, n = [], 0.0, 1
    while elapsed <= span:
        waits.append(min(BACKOFF_FIRST_S * 2 ** (n - 1), BACKOFF_MAX_S))
        elapsed += waits[-1]
        n += 1
    slow = ~frame["error_class"].isin(NEVER_REACHED) & ((frame["t_done"] - start) >= FAST_FAIL_S)
    return USERS * len(waits) + 6 * int(slow.sum())


def assert_exit(done, code: int) -> None:
    """The expected exit code; or 5 where it would be 0 or 3 but the shared machine left no step clean (another
    job kept the host busy: an honest verdict, not a failure of what is tested; ``assert_run_completed``)."""
    if code in (0, 3) and done.returncode == 5:
        assert_run_completed(done)
    else:
        assert done.returncode == code, done.stderr[-3000:]


def assert_counted(done, frame) -> None:
    assert frame is not None and len(frame) == counted(done.stdout) > 0, done.stderr[-3000:]


# -- a server's counts --------------------------------------------------------------------------------------------


COUNT_FAULTS = [
    # refserver flags, error class, words in every message
    (
        ["--usage", "none", "--patch-last", '{"usage.completion_tokens": 5000}'],
        "suspect_usage",
        "usage.completion_tokens 5000 (usage+text_share) is above max_tokens 8",
    ),
    (["--patch-last", '{"usage.completion_tokens": 3}'], "malformed_event", "went down from 7 to 3 at event 8"),
]


@pytest.mark.parametrize("flags, error_class, words", COUNT_FAULTS, ids=["above-max-tokens", "going-down"])
def test_a_server_whose_counts_cannot_be_right(tmp_path, refserver_factory, flags, error_class, words):
    server = refserver_factory(*QUICK, *flags)
    done, frame = run(tmp_path, server.url)
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == error_class).all(), frame["error_class"].value_counts()
    assert frame["error_message"].str.contains(words, regex=False).all(), frame["error_message"].iloc[0]
    summary = json.loads((tmp_path / "h" / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    assert step["output_tps"] in (None, 0.0)  # no claimed token counts as throughput
    if error_class == "suspect_usage":
        assert step["status"] == "suspect-usage" and step["suspect_usage"] == step["requests"]


def test_a_final_total_far_from_the_text_is_suspect_for_every_request(tmp_path, refserver_factory):
    """40 words streamed, a final usage of 2: the server's /tokenize counts the words (one token each). A final
    total alone is split by the tokenizer anyway, so every request's total is checked."""
    server = refserver_factory(*QUICK, "--usage", "none", "--patch-last", '{"usage.completion_tokens": 2}')
    done, frame = run(tmp_path, server.url, "--max-tokens", "40")
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == "suspect_usage").all(), frame["error_class"].value_counts()
    message = "the server counts 2 output tokens (usage.completion_tokens), the tokenizer counts 40 in the 150"
    assert frame["error_message"].str.startswith(f"suspect usage: {message}").all(), frame["error_message"].iloc[0]


def test_exact_per_chunk_counts_far_from_the_text_are_caught_in_the_checked_sample(tmp_path, refserver_factory):
    """Continuous usage, every count a fifth of the truth (8 for 40 words: consistent, and wrong). The first
    requests of the step are checked against the tokenizer; the step is flagged and left out."""
    server = refserver_factory(*QUICK, "--usage-factor", "0.2")
    done, frame = run(tmp_path, server.url, "--max-tokens", "40")
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert frame["error_class"].isna().all()  # on disk, the rows keep what the server said ...
    frame = load_run(tmp_path / "h").requests  # ... and the run's usage_suspect event amends those checked
    suspect = frame[frame["error_class"] == "suspect_usage"]
    assert len(suspect) == min(USAGE_CHECKS_PER_STEP, len(frame)), frame["error_class"].value_counts()
    assert frame.drop(suspect.index)["error_class"].isna().all()
    message = "the server counts 8 output tokens (usage.completion_tokens), the tokenizer counts 40 in the 150"
    assert suspect["error_message"].str.startswith(f"suspect usage: {message}").all(), suspect["error_message"].iloc[0]
    (step,) = json.loads((tmp_path / "h" / "summary.json").read_text())["variants"]["ref"]["steps"]
    assert step["status"] == "suspect-usage" and step["suspect_usage"] > 0


# -- HTTP as a peer speaks it ---------------------------------------------------------------------------------------


HTTP_FAULTS = [
    # front mode, exit code, error class (None: they succeed), words in every message
    ("continue", 0, None, None),
    ("redirect", 5, "http_error", "HTTP 307 redirect to http://127.0.0.1:"),
    ("json", 5, "not_streamed", "the server did not stream (Content-Type application/json): a whole answer"),
    ("close_after_head", 5, "truncated_stream", "closed the connection before the end of the response body"),
]


@pytest.mark.parametrize("mode, code, error_class, words", HTTP_FAULTS, ids=[f[0] for f in HTTP_FAULTS])
def test_http_as_a_peer_speaks_it(tmp_path, refserver_factory, mode, code, error_class, words):
    server = refserver_factory(*(QUICK if code else CALM))
    with Front(server.url, mode) as front:
        done, frame = run(tmp_path, front.url)
    assert_exit(done, code)
    assert_counted(done, frame)
    if error_class is None:
        assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
        return
    assert (frame["error_class"] == error_class).all(), frame["error_class"].value_counts()
    assert frame["error_message"].str.contains(words, regex=False).all(), frame["error_message"].iloc[0]
    if mode == "redirect":  # answered at once, again and again: the users back off
        assert len(frame) <= backoff_bound(frame), len(frame)
        assert "the server refused or failed fast" in done.stderr


def test_nothing_listening_is_refused_with_backoff_and_blames_no_client(tmp_path):
    done, frame = run(tmp_path, f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == "connect_error").all()
    assert len(frame) <= backoff_bound(frame), len(frame)
    assert "the server refused or failed fast" in done.stderr and "client was the bottleneck" not in done.stderr


def test_a_503_with_retry_after_is_waited_out(tmp_path, refserver_factory):
    """503 with Retry-After: 1 for the first 2 s, then answers: each user asks about once a second meanwhile."""
    server = refserver_factory(*QUICK)
    with Front(server.url, "refuse_for:2") as front:
        done, frame = run(tmp_path, front.url, "--step-duration", "4")
    assert_counted(done, frame)
    refused = frame[frame["http_status"] == 503]
    assert (refused["error_message"].str.endswith("(Retry-After: 1)")).all()
    assert 0 < len(refused) <= USERS * (2 + 1), len(refused)  # 2 s of refusals, one per second per user at most
    answered = frame[frame["http_status"] == 200]
    assert len(answered) > 0 and answered["error_class"].isna().all(), done.stderr[-3000:]
    summary = json.loads((tmp_path / "h" / "summary.json").read_text())
    rate = summary["variants"]["ref"]["steps"][0]["error_rate"]
    assert_exit(done, 3 if rate > 0.05 else 0)


def test_tls_failures_are_named_and_a_private_ca_is_trusted_through_ssl_cert_file(tmp_path, refserver_factory):
    server = refserver_factory(*CALM)
    certs = make_certs(tmp_path / "certs")
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")}
    with Front(server.url, certs=certs) as front:
        untrusted_dir, trusted_dir = tmp_path / "untrusted", tmp_path / "trusted"
        untrusted_dir.mkdir()
        trusted_dir.mkdir()
        done, frame = run(untrusted_dir, front.url, env=env)
        # A bundle for requests (as many systems set) must not shadow the private CA for the /metrics scrape.
        trusting = {**env, "SSL_CERT_FILE": certs["ca"], "REQUESTS_CA_BUNDLE": certifi.where()}
        trusted, trusted_frame = run(trusted_dir, front.url, env=trusting)
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == "tls_error").all(), frame["error_class"].value_counts()
    assert frame["error_message"].str.contains("certificate verify failed: unable to get local issuer").all()
    assert frame["error_message"].str.contains("SSL_CERT_FILE").all()
    assert len(frame) <= backoff_bound(frame), len(frame)
    assert_exit(trusted, 0)
    assert_counted(trusted, trusted_frame)
    assert trusted_frame["error_class"].isna().all()
    telemetry = json.loads((trusted_dir / "h" / "telemetry.json").read_text())
    assert telemetry["gaps"] == [], telemetry["gaps"]
    assert telemetry["attachments"][0]["sources"][0]["polls"] > 0


def test_a_slow_tokenizer_holds_the_step_clock_not_the_first_requests(tmp_path, refserver_factory):
    """Each /tokenize answer takes 20 ms, as from a server across a network: the prompts take seconds to build
    (hundreds of calls, ``PARALLEL`` at a time), and the step starts after them, so the users send from its first
    moment."""
    server = refserver_factory(*CALM)
    with Front(server.url, "slow_tokenize:0.02") as front:
        done, frame = run(tmp_path, front.url)
    assert_exit(done, 0)
    assert_counted(done, frame)
    step = json.loads((tmp_path / "h" / "steps.json").read_text())["steps"][0]
    building_s = 0.02 * len(WORDS) / ServerTokenizer.PARALLEL  # at least, had the step not waited for it
    assert building_s > 1.0
    assert frame["t_send"].min() - step["t_start"] < 0.5, frame["t_send"].min() - step["t_start"]  # the warm-up


def test_a_hung_first_token_is_a_first_token_timeout_never_cancelled(tmp_path, refserver_factory):
    """The server reads each request and never answers; the load stops (drain) while the streams wait."""
    server = refserver_factory(*QUICK)
    scenario = SCENARIO + "  timeouts: {first_token_s: 2}\n"
    with Front(server.url, "hang") as front:
        done, frame = run(tmp_path, front.url, scenario=scenario)
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == "first_token_timeout").all(), frame["error_class"].value_counts()
    assert (frame["error_message"] == "no first token within 2 s").all()


# -- bad input stops before the first request ---------------------------------------------------------------------


# One run per kind of input (the other cases of each are unit tests: tests/unit/runtime/test_plan.py).
BAD_INPUT = [
    # environment, extra scenario lines, dataset bytes (None: a directory), words in the one error line
    ({"LOCUST_LLM_API_KEY": "k\r\nX-Injected: evil"}, "", b"", "LOCUST_LLM_API_KEY holds the control character '\\r'"),
    ({}, "  dataset: d.jsonl\n", None, "d.jsonl: is a directory"),
    ({}, "  dataset: d.jsonl\n", b'{"prompt": "a"}\n{"prompt": b}\n', "d.jsonl:2:12: not valid JSON"),
]


@pytest.mark.parametrize("env, lines, dataset, words", BAD_INPUT, ids=["key-crlf", "directory", "bad-line"])
def test_bad_input_stops_before_the_first_request(tmp_path, refserver_factory, env, lines, dataset, words):
    server = refserver_factory(*QUICK)
    if dataset is None:
        (tmp_path / "d.jsonl").mkdir()
    else:
        (tmp_path / "d.jsonl").write_bytes(dataset)
    done, frame = run(tmp_path, server.url, env=env, scenario=SCENARIO + lines)
    assert done.returncode == 2, done.stderr[-3000:]
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert frame is None and server.all_logs() == []  # not one request reached the server
    assert "X-Injected" not in done.stderr  # the key is never printed


def test_a_host_path_that_would_break_the_request_line_stops_the_run(tmp_path, refserver_factory):
    server = refserver_factory(*QUICK)
    done, frame = run(tmp_path, server.url + "/v1\r\nX-Injected: 1")
    assert done.returncode == 2 and "must be percent-encoded" in done.stderr, done.stderr[-3000:]
    assert frame is None and server.all_logs() == []


def test_a_dataset_with_a_bom_and_unicode_line_separators_in_its_strings_runs(tmp_path, refserver_factory):
    server = refserver_factory(*QUICK)
    prompts = ["one\u2028two", "three\u2029four", "five\u0085six"]
    body = "\n".join(json.dumps({"prompt": p}, ensure_ascii=False) for p in prompts)
    (tmp_path / "d.jsonl").write_bytes(b"\xef\xbb\xbf" + body.encode())
    done, frame = run(tmp_path, server.url, scenario=SCENARIO + "  dataset: d.jsonl\n")
    assert_exit(done, 0)
    assert_counted(done, frame)
    assert frame["error_class"].isna().all()


# -- one writer per run directory ------------------------------------------------------------------------------------


def test_a_second_run_on_a_run_directory_being_written_is_refused_and_report_waits(tmp_path, refserver_factory):
    server = refserver_factory(*QUICK)
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(SCENARIO)
    first = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--skip-log", "--json", "--host", server.url]
        + ["--scenario", str(scenario), "--run-id", "one", "--report-dir", str(tmp_path), "--step-duration", "6"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "one" / "steps.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        second = run_locust(
            tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", "one", "--overwrite", timeout=120
        )
        report = subprocess.run(
            [sys.executable, "-m", "locust_llm.cli", "report", str(tmp_path / "one")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        stdout, stderr = first.communicate(timeout=240)
    finally:
        terminate(first, 10)
    assert second.returncode == 2, second.stderr[-3000:]
    assert f"is being written by process {first.pid}" in second.stderr and "--overwrite never replaces" in second.stderr
    assert report.returncode == 7 and f"still being written by process {first.pid}" in report.stderr
    assert_exit(subprocess.CompletedProcess(first.args, first.returncode, stdout, stderr), 0)
    frame = pd.read_parquet(tmp_path / "one" / "requests.parquet")
    assert len(frame) == counted(stdout) > 0  # the first run's requests, all of them, and only them
    assert not (tmp_path / "one" / ".lock").exists()


# -- nothing unaccounted on a lost worker ---------------------------------------------------------------------------


def test_a_stopped_worker_s_requests_in_flight_are_counted_as_lost(tmp_path, refserver_factory):
    """One worker, SIGSTOP mid-step while its streams are in flight: the master stops the run (exit 5); the requests
    it will never hear of are counted, so rows + lost = the streams the server served."""
    # 8 tokens: 4 s a request, so that a test process slowed by a busy machine still stops the worker while the
    # streams it saw begin are in flight, before they end and their users send the next ones.
    server = refserver_factory("--ttft-s", "0", "--gap-s", "0.5")
    port = free_port()
    master = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--skip-log", "--headless", "--master"]
        + ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "1"]
        + ["--host", server.url, "--scenario", "scenarios/external.yaml", "--report-dir", str(tmp_path)]
        + ["--ladder", "2", "--step-duration", "30", "--warmup", "0", "--max-tokens", "8", "--run-id", "lost"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--skip-log", "--worker", "--master-port", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Streams in flight, begun long enough ago (1.2 s: past a record batch and the 0.1 s count) that the
            # master has the records of those before them and the count of these.
            logs = server.all_logs()
            in_flight = [s for s in logs if not s["complete"]]
            if len(logs) >= 4 and in_flight and time.perf_counter() - max(s["t_recv"] for s in logs) > 1.2:
                break
            time.sleep(0.05)
        worker.send_signal(signal.SIGSTOP)
        _, stderr = master.communicate(timeout=180)
    finally:
        worker.send_signal(signal.SIGCONT)
        terminate(master, 10)
        terminate(worker, 10)
    assert master.returncode == 5, stderr[-3000:]
    served = len(server.all_logs())
    rows = len(pd.read_parquet(tmp_path / "lost" / "requests.parquet"))
    events = json.loads((tmp_path / "lost" / "steps.json").read_text())["events"]
    lost = [e for e in events if e["kind"] == "worker_lost"]
    assert len(lost) == 1, (events, stderr[-3000:])
    event = lost[0]
    print(f"rows {rows} + requests_lost {event['requests_lost']} = {rows + event['requests_lost']}; served {served}")
    assert rows > 0 and event["requests_lost"] > 0 and rows + event["requests_lost"] == served, (rows, event, served)
    verdict = json.loads((tmp_path / "lost" / "verdict.json").read_text())
    said = f"{event['requests_lost']} requests in flight or not yet shipped are lost"
    assert any(said in reason for reason in verdict["reasons"]["5"]), verdict["reasons"]


def test_an_open_loop_keeps_its_clock_against_a_refusing_server(tmp_path):
    """Nothing listening, 20 req/s of constant arrivals: each arrival is one refused request, no more (nothing
    spins), and none is skipped (failures are counted): the rows are the clock's arrivals."""
    scenario = SCENARIO.replace("ladder: [2]", "mode: open\n  arrival: constant\n  ladder: [20]")
    done, frame = run(tmp_path, f"http://127.0.0.1:{free_port()}", scenario=scenario)
    assert done.returncode == 5, done.stderr[-3000:]
    assert_counted(done, frame)
    assert (frame["error_class"] == "connect_error").all()
    intended = frame["t_intended"].sort_values().to_numpy()
    gaps = intended[1:] - intended[:-1]
    assert len(frame) == frame["seq"].nunique() and abs(gaps - 1 / 20).max() < 1e-3, gaps


# -- round three: a server's bytes never forge a figure, a line or a stall -------------------------------------------


STREAM_FAULTS = [
    # script (tests.misbehaving.SCRIPTS), exit code, error class (None: they succeed), words in every message
    ("textless", 5, "empty_completion", "no text in 9 events; its usage.completion_tokens says 8"),
    ("usage_zero", 5, "suspect_usage", "usage.completion_tokens 0 for a stream that delivered 24 characters in 8"),
    ("usage_negzero", 5, "malformed_event", "usage.completion_tokens must be a non-negative integer"),
    ("bom", 0, None, None),
    ("lone_cr", 0, None, None),
    ("gzip", 0, None, None),
    ("error_event", 5, "server_error_event", 'server sent an error event (event: error): {"message": "overloaded"}'),
    ("brotli", 5, "malformed_event", "the server sent Content-Encoding: br although the client asked for identity"),
    ("nested", 5, "malformed_event", "event nests deeper than the JSON parser allows"),
    ("bad_utf8", 5, "malformed_event", "event is not UTF-8 (byte 0xff at 23)"),
    ("endless", 5, "suspect_usage", "the stream went on past max_tokens 8 (32 events with text of 32"),
    ("endless_empty", 5, "suspect_usage", "the stream went on past max_tokens 8 (1 events with text of 128"),
]


@pytest.mark.parametrize("script, code, error_class, words", STREAM_FAULTS, ids=[f[0] for f in STREAM_FAULTS])
def test_a_stream_s_bytes_never_forge_a_figure(tmp_path, refserver_factory, script, code, error_class, words):
    server = refserver_factory(*CALM)
    with Front(server.url, f"script:{script}") as front:
        started = time.monotonic()
        done, frame = run(tmp_path, front.url)
        wall = time.monotonic() - started
    assert_exit(done, code)
    assert_counted(done, frame)
    assert len(frame) == front.completions, (len(frame), front.completions)  # rows = requests served
    print(f"{script}: {len(frame)} rows, {front.completions} served, exit {done.returncode}, {wall:.1f} s")
    (step,) = json.loads((tmp_path / "h" / "summary.json").read_text())["variants"]["ref"]["steps"]
    if error_class is None:
        assert frame["error_class"].isna().all(), frame["error_message"].dropna().head(3).tolist()
        assert (frame["output_tokens"] == 8).all() and (frame["chunk_offsets"].map(len) == 8).all()
        return
    assert (frame["error_class"] == error_class).all(), frame["error_class"].value_counts()
    assert frame["error_message"].str.contains(words, regex=False).all(), frame["error_message"].iloc[0]
    assert step["output_tps"] in (None, 0.0), step["output_tps"]  # a failed request's tokens feed no rate
    if script == "textless":  # no text: no token time
        assert frame["t_first"].isna().all() and (frame["output_tokens"] == 0).all()
    if script in ("error_event", "endless", "endless_empty"):  # cut short, with what came before
        chunks = {"error_event": 3, "endless": 32, "endless_empty": 1}[script]
        assert frame["t_first"].notna().all() and (frame["chunk_offsets"].map(len) == chunks).all()


def metrics_page(drafts: float, draft_tokens: float, accepted: float, suffix: str = "") -> bytes:
    return (
        f"vllm:spec_decode_num_drafts_total {drafts}{suffix}\n"
        f"vllm:spec_decode_num_draft_tokens_total {draft_tokens}{suffix}\n"
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}{suffix}\n"
    ).encode()


HOUR_BEHIND_MS = f" {int((time.time() - 3600) * 1000)}"
METRICS_FAULTS = [
    # a page for poll k, the step's acceptance rate (None: not shown), words in its reason or the console, whether
    # the console says "/metrics found" (samples were recorded)
    (lambda k: metrics_page(10 * k, 40 * k, 120 * k), None, "more tokens accepted than drafted", True),
    (lambda k: metrics_page(10 * k, 40 * k, 20 * k, HOUR_BEHIND_MS), 0.5, None, True),
    (
        lambda k: metrics_page(10 * k, 40 * k, 20 * k) + b"vllm:spec_decode_num_drafts_total{a=} x\n",
        None,
        "(line 4: 'vllm:spec_decode_num_drafts_total{a=} x')",
        False,
    ),
    (lambda k: (metrics_page(10 * k, 40 * k, 20 * k), 30.0), None, "Read timed out", False),
    (lambda k: b"vllm:num_requests_running\x1b]0;t\x07\x1b[2J 1\n", None, "invalid metric name", False),
]


@pytest.mark.parametrize(
    "page, rate, words, found", METRICS_FAULTS, ids=["accepted-3x", "hour-behind", "bad-line", "30-s", "escapes"]
)
def test_telemetry_is_judged_before_it_is_believed(tmp_path, refserver_factory, page, rate, words, found):
    server = refserver_factory(*CALM)
    with Front(server.url, metrics=page) as front:
        done, frame = run(tmp_path, front.url, "--step-duration", "4")
    assert_exit(done, 0)
    assert_counted(done, frame)
    (step,) = json.loads((tmp_path / "h" / "summary.json").read_text())["variants"]["ref"]["steps"]
    figures = step["server"]
    acceptance = (figures.get("acceptance") or {}).get("rate")
    reasons = " | ".join(m["reason"] for m in figures.get("missing") or [] if m["figure"].startswith("acceptance"))
    if rate is not None:
        assert acceptance == pytest.approx(rate), reasons
        return
    assert acceptance is None
    summary_md = (tmp_path / "h" / "summary.md").read_text()
    assert "300.0%" not in summary_md and "\x1b" not in summary_md
    console = done.stdout + done.stderr
    assert "\x1b" not in console
    assert words in reasons or words in console, (reasons, console[-2000:])
    assert ("/metrics found" in console) == found, console[-2000:]
    if not found:
        assert "not exposed" not in reasons and "/metrics not found: " in console, (reasons, console[-2000:])


def test_a_50_mb_metrics_page_is_a_named_gap_and_the_load_keeps_its_pace(tmp_path, refserver_factory):
    """50 MB a poll: not read (the cap), named; the step stays client-valid (the pages are not parsed)."""
    server = refserver_factory(*CALM)
    huge = b"vllm:num_requests_running 1\n" + b"# " + b"x" * 1000 + b"\n" * 50_000 * 1000
    with Front(server.url, metrics=lambda k: huge) as front:
        done, frame = run(tmp_path, front.url, "--step-duration", "4")
    assert_exit(done, 0)
    assert_counted(done, frame)
    assert front.metric_pages > 0
    telemetry = json.loads((tmp_path / "h" / "telemetry.json").read_text())
    assert any("larger than 8 MiB (the cap)" in gap["error"] for gap in telemetry["gaps"]), telemetry["gaps"]
    source = telemetry["attachments"][0]["sources"][0]
    assert source["samples"] == 0 and source["failures"] == source["polls"] > 0, source
    (step,) = json.loads((tmp_path / "h" / "summary.json").read_text())["variants"]["ref"]["steps"]
    if step["status"] != "contended":  # on a host busy with other work the client's share is the host's doing
        assert step["client_valid"] is not False, step["client_validity"]


def test_a_forged_owned_by_and_model_id_are_printed_escaped(tmp_path, refserver_factory):
    server = refserver_factory(*CALM)
    forged = "x\nShutting down (exit code 0)\nlocust-llm verdict for run h: exit code 0"
    models = {"data": [{"id": "m\x1b]0;owned\x07\x1b[2J", "object": "model", "owned_by": forged}]}
    with Front(server.url, models=models) as front:
        done, frame = run(tmp_path, front.url)
    assert_counted(done, frame)
    console = done.stdout + done.stderr
    verdicts = [line for line in console.splitlines() if line.startswith("locust-llm verdict for run h")]
    assert len(verdicts) == 1, console[-3000:]
    assert "Shutting down (exit code 0)\n" not in console and "\x1b" not in console
    assert "owned_by x\\nShutting down (exit code 0)\\nlocust-llm verdict" in console
    assert "\x1b" not in (tmp_path / "h" / "summary.md").read_text()
