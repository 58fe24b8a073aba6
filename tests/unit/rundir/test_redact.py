"""What the redactor masks in text written to run files, and ordinary report text it must leave alone."""

import json

import pytest

from locust_llm.rundir import redact as redact_module
from locust_llm.rundir.layout import redact_file, write_json
from locust_llm.rundir.redact import redact_text


@pytest.mark.parametrize(
    "text, masked",
    [
        ("llama-server --api-key sk-live-1234 -c 4096", "llama-server --api-key *** -c 4096"),
        ("vllm serve m --hf-token=hf_abcdef", "vllm serve m --hf-token=***"),
        ("HF_TOKEN=hf_abcdef", "HF_TOKEN=***"),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("http://user:pw@127.0.0.1:8000/v1", "http://user:***@127.0.0.1:8000/v1"),
        ("https://ghp_TOKEN1234@example.com/x", "https://***@example.com/x"),
    ],
)
def test_secrets_in_text_are_masked(text, masked):
    assert redact_text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "256-token prompts",
        "<caption>2048-token prompts</caption>",
        "prompt-token counts",
        "max_tokens: 64",
        "tokens per target pass 4.3",
    ],
)
def test_ordinary_text_about_tokens_is_kept(text):
    assert redact_text(text) == text


def test_a_server_log_is_masked_by_replacing_it_whole_and_a_clean_one_is_left_alone(tmp_path):
    log, clean = tmp_path / "server-a.log", tmp_path / "server-b.log"
    log.write_text("main: llama-server --api-key sk-live-1234 -c 4096\nready\n")
    clean.write_text("ready\n")
    before = log.stat().st_ino, clean.stat().st_ino
    redact_file(log)
    redact_file(clean)
    redact_file(tmp_path / "missing.log")  # a server that never wrote one: nothing to do
    assert log.read_text() == "main: llama-server --api-key *** -c 4096\nready\n"
    assert log.stat().st_ino != before[0]  # renamed over (atomic_write), never rewritten in place
    assert clean.stat().st_ino == before[1] and clean.read_text() == "ready\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server-a.log", "server-b.log"]  # no .tmp left


@pytest.fixture
def known(monkeypatch):
    """The remembered secrets of this test only (the module keeps them for the process)."""
    monkeypatch.setattr(redact_module, "_KNOWN", set())
    return redact_module


def test_a_secret_shaped_like_a_word_of_the_run_files_is_masked_only_where_it_is_a_secret(tmp_path, known):
    # A password equal to a key of steps.json once turned "users" into "***s" in the run's own files.
    known.remember("users", "requests", "s3cret", "throughput_tokens")
    steps = {"steps": [{"users": 2, "requests": 10, "mode": "closed", "throughput_tokens": 5}]}
    write_json(tmp_path / "steps.json", steps)
    assert json.loads((tmp_path / "steps.json").read_text()) == steps
    assert redact_text("http://alice:users@h:1/v1 --api-key s3cret") == "http://alice:***@h:1/v1 --api-key ***"


def test_a_long_secret_is_masked_in_values_and_never_changes_a_key(tmp_path, known):
    known.remember("Zx9-live-key-0042")
    write_json(tmp_path / "env.json", {"Zx9-live-key-0042": "server said Zx9-live-key-0042 twice", "n": 1})
    assert json.loads((tmp_path / "env.json").read_text()) == {"Zx9-live-key-0042": "server said *** twice", "n": 1}


def test_a_username_is_kept_and_a_bare_userinfo_is_masked_as_a_token():
    assert redact_text("at http://alice:pw@h/x and ftp://bob:@h") == "at http://alice:***@h/x and ftp://bob:***@h"
    assert redact_text("mailto:alice@example.com") == "mailto:alice@example.com"


def test_a_long_log_message_is_cut_before_it_is_masked():
    message = "refused GET /llm/" + "a" * 20_000
    cut = redact_module.cut(message)
    assert cut.startswith(message[: redact_module.MAX_LOG_MESSAGE])
    assert cut.endswith(f"({len(message) - redact_module.MAX_LOG_MESSAGE} more characters cut)")
    assert redact_module.cut("short") == "short"
