"""Misbehaving servers and bad input, each as a real headless run: the documented exit code, a clear message,
and ``requests.parquet`` holding exactly the requests Locust counted (docs/faults-and-probes.md, "Faults and bad
input")."""

import json

import pandas as pd
import pytest

from tests.helpers import host_left_no_clean_step, run_locust

SCENARIO = """
name: faults
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load: {ladder: [2], step_duration_s: 2, warmup_s: 0.5, prompt_tokens: 16, max_tokens: 8}
"""

SERVER_FAULTS = [
    # refserver flags, exit code, error class of the requests (None: they succeed), words in the message
    (["--patch-last", '{"choices.0.finish_reason": 7}'], 5, "malformed_event", "finish_reason"),
    (["--patch-last", '{"timings.draft_n": 1e20}'], 5, "malformed_event", "draft_n"),
    (["--patch-last", '{"usage.prompt_tokens": 2147483653}'], 0, None, None),  # large, but a real count
    (["--fault", "http_500_endless"], 5, "http_error", "HTTP 500"),
    (["--fault", "huge_event_after:1"], 5, "malformed_event", "longer than"),
    (["--fault", "truncate_after:2"], 5, "truncated_stream", "without [DONE]"),
    (["--models-answer", "list"], 0, None, None),
    (["--models-answer", "garbage"], 0, None, None),
]


def counted(stdout: str) -> int:
    return sum(entry["num_requests"] for entry in json.loads(stdout[stdout.index("[") :]))


@pytest.mark.parametrize("flags, code, error_class, words", SERVER_FAULTS, ids=[" ".join(f[0]) for f in SERVER_FAULTS])
def test_a_misbehaving_server(tmp_path, refserver_factory, flags, code, error_class, words):
    # exit 0 needs a server slow enough that the client's ~1 ms per request stays far below 5% of each cycle
    timing = ("--ttft-s", "0.005", "--gap-s", "0.002") if code else ("--ttft-s", "0.02", "--gap-s", "0.01")
    server = refserver_factory(*timing, *flags)
    scenario = tmp_path / "faults.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(
        tmp_path, "--json", "--host", server.url, "--scenario", str(scenario), "--run-id", "f", timeout=120
    )
    assert done.returncode == code or host_left_no_clean_step(tmp_path / "f", done, code), done.stderr[-3000:]
    frame = pd.read_parquet(tmp_path / "f" / "requests.parquet")
    assert len(frame) == counted(done.stdout) > 0  # every request Locust counted is a row
    if error_class is None:
        assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
    else:
        assert (frame["error_class"] == error_class).all(), frame["error_class"].value_counts()
        assert frame["error_message"].str.contains(words, regex=False).all()
        assert frame["error_message"].str.len().max() <= 500


BAD_INPUT = [
    (["--host", "notaurl"], "--host must be an http(s) URL"),
    (["--ladder", "nan"], "finite number"),
    (["--ladder", "1e12"], "<= 100000"),
    (["--run-id", "../../x"], "not a plain name"),
    (["--max-tokens", "3000000000"], "less than or equal to 10000000"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_exit_2_with_one_clear_line(tmp_path, args, message):
    scenario = tmp_path / "faults.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(tmp_path, "--scenario", str(scenario), *args, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path.parent / "x").exists()
