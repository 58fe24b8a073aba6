"""HTTP as a peer speaks it: interim 1xx answers skipped, a redirect named with its Location, a whole JSON answer
to a streaming request said to be one, a clean close after the head a truncated stream, a TLS failure named as
one (and a private CA trusted through SSL_CERT_FILE), a refusal's Retry-After read, a request head that cannot be
sent refused before it is built. Each against a misbehaving front (``tests.misbehaving``) of the reference server.
"""

from __future__ import annotations

import math

import pytest

from locust_llm.client.stream import StreamingClient
from locust_llm.client.transport import Target, build_request
from locust_llm.records import ErrorClass as R
from locust_llm.records import RequestRecord
from tests.misbehaving import Front, make_certs

from .test_stream_accuracy import make_spec, run


def test_interim_1xx_answers_are_skipped(refserver):
    with Front(refserver.url, "continue") as front:
        record = run(front.url, make_spec(8, ttft_s=0, gap_s=0.002))
    assert record.ok, (record.error_class, record.error_message)
    assert record.http_status == 200 and record.output_tokens == 8 and front.completions == 1


def test_a_redirect_is_reported_with_its_location_and_not_followed(refserver):
    streams = len(refserver.all_logs())
    with Front(refserver.url, "redirect") as front:
        record = run(front.url, make_spec(8))
    assert record.error_class == R.HTTP_ERROR and record.http_status == 307
    assert f"HTTP 307 redirect to {refserver.url}/v1/completions: redirects are not followed" in record.error_message
    assert len(refserver.all_logs()) == streams  # nothing went on to the server


def test_a_whole_json_answer_to_a_stream_says_the_server_did_not_stream(refserver):
    with Front(refserver.url, "json") as front:
        record = run(front.url, make_spec(8))
    assert record.error_class == R.NOT_STREAMED and record.http_status == 200
    assert record.error_message.startswith("the server did not stream (Content-Type application/json)")
    assert "finish_reason 'length', usage.completion_tokens 8" in record.error_message


def test_a_clean_close_after_the_head_is_a_truncated_stream_not_a_reset(refserver):
    with Front(refserver.url, "close_after_head") as front:
        record = run(front.url, make_spec(8))
    assert record.error_class == R.TRUNCATED and record.http_status == 200
    assert "closed the connection before the end of the response body" in record.error_message


def test_a_refusal_carries_its_retry_after(refserver):
    with Front(refserver.url, "refuse_for:60") as front:
        client = StreamingClient(front.url)
        record = RequestRecord()
        try:
            client.stream(make_spec(8), record)
        finally:
            client.close()
    assert record.error_class == R.HTTP_ERROR and record.http_status == 503
    assert client.retry_after == 1.0 and record.error_message.endswith("(Retry-After: 1)")
    assert record.failed_fast  # the user backs off after it


def test_tls_failures_are_tls_errors_and_a_private_ca_is_trusted_through_ssl_cert_file(
    refserver, tmp_path, monkeypatch
):
    certs = make_certs(tmp_path / "certs")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with Front(refserver.url, certs=certs) as front:
        untrusted = run(front.url, make_spec(8))
        monkeypatch.setenv("SSL_CERT_FILE", certs["ca"])
        trusted = run(front.url, make_spec(8, ttft_s=0, gap_s=0.002))
    assert untrusted.error_class == R.TLS_ERROR, (untrusted.error_class, untrusted.error_message)
    assert "TLS handshake with 127.0.0.1" in untrusted.error_message
    assert "failed: certificate verify failed: unable to get local issuer certificate" in untrusted.error_message
    assert "SSL_CERT_FILE" in untrusted.error_message and math.isnan(untrusted.t_send)
    assert not math.isnan(untrusted.t_connect) and untrusted.failed_fast
    assert trusted.ok and trusted.output_tokens == 8, (trusted.error_class, trusted.error_message)
    plain = run(f"https://127.0.0.1:{refserver.port}", make_spec(8))  # TLS spoken to a plain HTTP server
    assert plain.error_class == R.TLS_ERROR, (plain.error_class, plain.error_message)


@pytest.mark.parametrize(
    "key, words",
    [("k\r\nX-Injected: evil", "control character '\\r'"), ("kéy€", "which an HTTP header cannot carry")],
)
def test_a_header_that_would_inject_another_is_never_built(key, words):
    target = Target.parse("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="Authorization holds"):
        build_request(target, "/v1/completions", b"{}", {"Authorization": f"Bearer {key}"})
    with pytest.raises(ValueError, match=words.replace("\\", "\\\\")):
        build_request(target, "/v1/completions", b"{}", {"Authorization": key})


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/a b", "http://127.0.0.1:9/v1\r\nX: y", "http://127.0.0.1:9/ü"])
def test_a_url_that_would_break_the_request_line_is_refused(url):
    with pytest.raises(ValueError, match="must be percent-encoded"):
        Target.parse(url)
