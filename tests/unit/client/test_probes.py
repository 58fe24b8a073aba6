"""The probe suite against the reference server, whose answers to each abnormal input are known from its code:
it ignores the model and the temperature, rejects a negative max_tokens and a body that is not UTF-8 JSON with a
400, streams whatever else it is sent, and with ``--exit-on`` dies on the request that holds the text."""

import json
import time

from locust_llm.client.probes import CONTROL_TEXT, PROBES, Target, run_suite

SHORT_RECOVER_S = 10.0  # generous: a busy machine must not turn a slow recovery into a failed probe


def target(url: str, **given) -> Target:
    return Target(
        **{
            "variant": "v",
            "base_url": url,
            "engine": "external",
            "model": "m",
            "context": None,
            "burst": 6,
            "alive": lambda: True,
            "recover_s": SHORT_RECOVER_S,
            "timeout_s": 20.0,
            **given,
        }
    )


def test_each_probe_gets_the_reference_servers_known_answer(refserver):
    rows = {r.probe: r for r in run_suite(target(refserver.url))}
    assert list(rows) == [p.name for p in PROBES]
    verdicts = {name: r.verdict for name, r in rows.items()}
    assert verdicts == {
        "empty_prompt": "ok",
        "invalid_utf8": "ok",
        "control_characters": "ok",
        "unknown_model": "ok",
        "negative_max_tokens": "ok",
        "client_disconnect": "ok",
        "burst": "ok",
        # no context size in its /v1/models: nothing to be at or over
        "prompt_at_context": "not-run",
        "prompt_over_context": "not-run",
        "output_to_context": "not-run",
        # it ignores the temperature, so a temperature that is not a number is answered
        "temperature_not_a_number": "unexpected",
    }
    assert rows["empty_prompt"].status == 200 and rows["empty_prompt"].answer.startswith("HTTP 200, 8 tokens")
    assert rows["invalid_utf8"].status == 400 and rows["invalid_utf8"].error == "the request body is not JSON"
    assert rows["negative_max_tokens"].status == 400 and "got -5" in rows["negative_max_tokens"].error
    assert rows["unknown_model"].note == "answered with its own model"
    assert rows["temperature_not_a_number"].note == "accepted a temperature that is not a number", repr(
        rows["temperature_not_a_number"]
    )
    assert "does not say its context size" in rows["prompt_at_context"].note
    assert rows["client_disconnect"].answer == "HTTP 200, 3 chunks read, then the socket closed"
    assert rows["burst"].answer.startswith("6 x 200;")
    for row in rows.values():
        if row.verdict != "not-run":
            assert row.recovered and 0 < row.recover_ms < 1000 * SHORT_RECOVER_S
            assert row.t_start <= row.t_end and row.latency_ms >= 0


def test_the_disconnected_stream_was_cut_short_on_the_server(refserver):
    """The server's own log: the probe's stream was abandoned after a few chunks (never completed)."""
    before = len(refserver.all_logs())
    next(run_suite(target(refserver.url), [p for p in PROBES if p.name == "client_disconnect"]))
    streams = [log for log in refserver.all_logs()[before:] if log["max_tokens"] == 256]
    assert len(streams) == 1 and not streams[0]["complete"]
    assert 3 <= len([c for c in streams[0]["chunks"] if c[2] == "token"]) < 256


def test_a_server_that_crashes_on_a_probe_is_server_failed_and_the_rest_are_not_run(refserver_factory):
    marker = json.dumps(CONTROL_TEXT)[7:13]  # the escape of U+0000 as the JSON body carries it: \u0000
    assert marker == "\\u0000"
    server = refserver_factory("--exit-on", marker)
    started = time.monotonic()
    rows = {r.probe: r for r in run_suite(target(server.url))}
    crashed = rows["control_characters"]
    assert crashed.verdict == "server-failed" and crashed.status is None and not crashed.recovered
    assert crashed.note.startswith(f"no one-token completion within {SHORT_RECOVER_S:g} s")
    assert server.proc.wait(5) == 70
    order = [p.name for p in PROBES]
    after = order[order.index("control_characters") + 1 :]
    assert all(
        rows[name].verdict == "not-run" and rows[name].note == "the server failed at control_characters"
        for name in after
    )
    assert rows["empty_prompt"].verdict == "ok"  # before the crash
    assert time.monotonic() - started < 30
