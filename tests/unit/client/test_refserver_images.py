"""The reference server reads OpenAI image content: well-formed images are logged with their decoded sizes and cost
their known prefill delay; a malformed part is a 400 with an OpenAI-style error body."""

from __future__ import annotations

import base64
import uuid

import pytest
import requests

from locust_llm.client.stream import RequestSpec, StreamingClient
from locust_llm.records import RequestRecord
from locust_llm.scenario.images import synthetic_png
from tests.unit.workload.test_images import jpeg_header

PNG = synthetic_png(64, 48, "refserver")
JPEG = jpeg_header(30, 40)


def url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_images_are_logged_with_their_sizes_and_delay_the_first_token_by_the_configured_cost(refserver):
    stream_id = uuid.uuid4().hex
    ms_per_kpx, ttft_s = 10.0, 0.01
    spec = RequestSpec(
        prompt="describe these two",
        max_tokens=3,
        api="chat",
        images=(url(PNG, "image/png"), url(JPEG, "image/jpeg")),
        extra={"ref": {"id": stream_id, "image_ms_per_kpx": ms_per_kpx, "ttft_s": ttft_s}},
    )
    client = StreamingClient(refserver.url)
    record = RequestRecord()
    try:
        client.stream(spec, record)
    finally:
        client.close()
    assert record.ok and record.output_tokens == 3, record.error_message
    log = refserver.stream_log(stream_id)
    assert log["images"] == [
        {"mime": "image/png", "bytes": len(PNG), "width": 64, "height": 48},
        {"mime": "image/jpeg", "bytes": len(JPEG), "width": 30, "height": 40},
    ]
    delay = ms_per_kpx * (64 * 48 + 30 * 40) / 1e6  # 42.7 ms
    assert log["image_delay_s"] == pytest.approx(delay)
    first = next(t for t, tokens, _ in log["chunks"] if tokens > 0)
    assert ttft_s + delay <= first - log["t_recv"] < ttft_s + delay + 0.05
    assert record.prompt_tokens == 3  # the server counts the text parts only


def chat(content) -> dict:
    return {"stream": True, "max_tokens": 2, "messages": [{"role": "user", "content": content}]}


BAD_CONTENT = [
    ({"text": "a dict, not a list"}, "messages[0]: expected an object whose 'content' is a string or a list"),
    ([{"type": "audio", "audio": "x"}], "messages[0].content[0]: expected {'type': 'text'"),
    ([{"type": "text", "text": 7}], "messages[0].content[0]: expected"),
    ([{"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}], "expected a data: URL"),
    ([{"type": "image_url", "image_url": "data:image/png;base64,AAAA"}], "expected a data: URL"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png," + "x" * 8}}], "expected data:<type>;base64"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}], "not valid base64"),
    ([{"type": "image_url", "image_url": {"url": url(b"GIF89a-------", "image/png")}}], "not a PNG or JPEG"),
    ([{"type": "image_url", "image_url": {"url": url(JPEG, "image/png")}}], "declared 'image/png', but the data is"),
]


@pytest.mark.parametrize("content, words", BAD_CONTENT, ids=[w for _, w in BAD_CONTENT])
def test_malformed_parts_are_400_with_an_openai_error_body(refserver, content, words):
    answer = requests.post(refserver.url + "/v1/chat/completions", json=chat(content), timeout=10)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert words in error["message"] and error["type"] == "BadRequestError" and error["code"] == 400


def test_a_refserver_flag_sets_the_image_cost(refserver_factory):
    server = refserver_factory("--image-ms-per-kpx", "0.5")
    stream_id = uuid.uuid4().hex
    image = {"type": "image_url", "image_url": {"url": url(PNG, "image/png")}}
    body = {**chat([{"type": "text", "text": "hi"}, image]), "ref": {"id": stream_id}}
    with requests.post(server.url + "/v1/chat/completions", json=body, timeout=10, stream=True) as answer:
        assert answer.status_code == 200
        assert b"[DONE]" in b"".join(answer.iter_content(None))
    assert server.stream_log(stream_id)["image_delay_s"] == pytest.approx(0.5 * 64 * 48 / 1e6)
