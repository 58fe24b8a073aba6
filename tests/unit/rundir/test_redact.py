"""What the redactor masks in text written to run files, and ordinary report text it must leave alone."""

import pytest

from locust_llm.rundir.layout import redact_file
from locust_llm.rundir.redact import redact_text


@pytest.mark.parametrize(
    "text, masked",
    [
        ("llama-server --api-key sk-live-1234 -c 4096", "llama-server --api-key *** -c 4096"),
        ("vllm serve m --hf-token=hf_abcdef", "vllm serve m --hf-token=***"),
        ("HF_TOKEN=hf_abcdef", "HF_TOKEN=***"),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("http://user:pw@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
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
