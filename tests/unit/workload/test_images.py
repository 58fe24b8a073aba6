"""Image requests: the synthetic PNGs read back by an independent decoder, the exact OpenAI chat body, the
text-only twins, and the scenario's errors for images in the wrong place."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from locust_llm.client.stream import RequestSpec
from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError, load_scenario
from locust_llm.scenario.images import image_header, synthetic_png
from locust_llm.workload import Workload, WorkloadError
from tests.unit.runtime.fakes import options

SCENARIO = """
name: img
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  api: chat
  buckets:
    vision: {prompt_tokens: 16, max_tokens: 4, images: IMAGES}
"""


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """An independent reading of an RGB PNG: every chunk's CRC, IHDR, and the rows (filter type 0 each)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0] == zlib.crc32(kind + body)
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, interlace) == (8, 2, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == height * stride and all(raw[row * stride] == 0 for row in range(height))
    return width, height, raw


def workload_of(tmp_path: Path, images: str) -> Workload:
    path = tmp_path / "img.yaml"
    path.write_text(SCENARIO.replace("IMAGES", images))
    scenario = load_scenario(path)
    return Workload.from_spec(scenario.load, None, path.parent, pool_size=8)


def scenario_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "img.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_synthetic_png_decodes_to_the_declared_size_and_is_seeded():
    png = synthetic_png(37, 21, "7|vision|image|0")  # sizes that are no multiple of a tile
    width, height, raw = decode_png(png)
    assert (width, height) == (37, 21) and image_header(png) == ("image/png", 37, 21)
    assert len(set(raw)) > 20  # coloured, not blank
    assert synthetic_png(37, 21, "7|vision|image|0") == png
    assert synthetic_png(37, 21, "8|vision|image|0") != png


def test_chat_body_is_openai_image_content_and_half_the_requests_are_text_only_twins(tmp_path):
    workload = workload_of(tmp_path, "{count: 2, width: 64, height: 48}")
    items = [workload.item(0, 0, index) for index in range(200)]
    with_images = [it for it in items if it.images]
    twins = [it for it in items if it.images == ()]
    assert len(with_images) + len(twins) == 200 and 70 < len(with_images) < 130
    # The twins draw from the same texts (after each request's unique marker), so both sides have the same length.
    assert {it.prompt_tokens for it in with_images} == {it.prompt_tokens for it in twins}
    words = workload.prefixer.length

    def text(item):
        return item.prompt.split(" ", words)[-1]

    assert {text(it) for it in with_images} & {text(it) for it in twins}
    assert [workload.item(0, 0, i) for i in range(200)] == items  # deterministic per (seed, worker, index)

    item = with_images[0]
    spec = RequestSpec(prompt=item.prompt, max_tokens=4, api="chat", images=tuple(i.url for i in item.images))
    body = json.loads(json.dumps(spec.body()))
    (message,) = body["messages"]
    assert message["role"] == "user"
    text, *parts = message["content"]
    assert text == {"type": "text", "text": item.prompt}
    assert len(parts) == 2 and len({p["image_url"]["url"] for p in parts}) == 2  # two different images
    for part in parts:
        assert set(part) == {"type", "image_url"} and part["type"] == "image_url"
        assert set(part["image_url"]) == {"url"}
        head, payload = part["image_url"]["url"].split(",", 1)
        assert head == "data:image/png;base64"
        assert decode_png(base64.b64decode(payload, validate=True))[:2] == (64, 48)
    # A text-only twin is the plain chat body.
    twin = RequestSpec(prompt=twins[0].prompt, max_tokens=4, api="chat").body()
    assert twin["messages"] == [{"role": "user", "content": twins[0].prompt}]
    assert workload.describe()["buckets"]["vision"]["images"]["sizes"] == ["64x48"]


def test_files_and_folders_are_sent_as_they_are(tmp_path):
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    (pictures / "a.png").write_bytes(synthetic_png(10, 20, "a"))
    (pictures / "notes.txt").write_text("not an image")
    jpeg = jpeg_header(30, 40)
    (pictures / "b.jpg").write_bytes(jpeg)
    workload = workload_of(tmp_path, "{files: [pictures], count: 1}")
    sent = {i.url for index in range(100) for i in workload.item(1, 0, index).images or ()}
    assert sent == {
        "data:image/png;base64," + base64.b64encode(synthetic_png(10, 20, "a")).decode(),
        "data:image/jpeg;base64," + base64.b64encode(jpeg).decode(),
    }


def jpeg_header(width: int, height: int) -> bytes:
    """SOI, a JFIF APP0 segment, a baseline SOF0 frame header and EOI: what a header reader must get through."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def test_jpeg_header_size_is_read_past_other_segments():
    assert image_header(jpeg_header(640, 480)) == ("image/jpeg", 640, 480)
    with pytest.raises(ValueError, match="not a PNG or JPEG"):
        image_header(b"GIF89a....")


@pytest.mark.parametrize(
    "change, words",
    [
        (
            ("api: chat", "api: completions"),
            ["load: buckets.vision.images: images travel in chat messages", "set 'api: chat'"],
        ),
        (
            ("IMAGES", "{files: [../outside.png]}"),
            ["load.buckets.vision.images.files: '../outside.png' leads out of", "give an absolute path"],
        ),
        (
            ("IMAGES", "{files: [a/../../x]}"),
            ["load.buckets.vision.images.files", "leads out of the scenario's folder"],
        ),
        (("IMAGES", "{widht: 64}"), ["load.buckets.vision.images.widht: unknown key 'widht'", "did you mean 'width'"]),
        (("IMAGES", "{format: jpeg}"), ["load.buckets.vision.images.format", "'png'"]),
        (("IMAGES", "{files: [x.png], width: 64}"), ["width describe synthetic images"]),
        (("IMAGES", "{files: [missing.png]}"), ["load.buckets.vision.images.files: 'missing.png'", "does not exist"]),
        (("IMAGES", "{files: [img.yaml]}"), ["load.buckets.vision.images.files", "not a PNG or JPEG"]),
        (("api: chat", "api: chat\n  dataset: d.jsonl"), ["buckets.vision.images: a dataset replaces the buckets'"]),
    ],
)
def test_scenario_errors_name_the_key_and_the_fix(tmp_path, change, words):
    text = SCENARIO.replace("IMAGES", "{count: 1}") if change[0] != "IMAGES" else SCENARIO
    message = scenario_error(tmp_path, text.replace(*change))
    for word in words:
        assert word in message, message


def test_an_absolute_path_outside_the_folder_is_allowed(tmp_path):
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(synthetic_png(8, 8, "x"))
    inner = tmp_path / "inner"
    inner.mkdir()
    path = inner / "img.yaml"
    path.write_text(SCENARIO.replace("IMAGES", f"{{files: [{outside}]}}"))
    assert load_scenario(path).load.buckets["vision"].images.files == [str(outside)]


def test_a_file_that_changed_after_the_scenario_was_read_is_a_workload_error(tmp_path):
    picture = tmp_path / "p.png"
    picture.write_bytes(synthetic_png(8, 8, "x"))
    path = tmp_path / "img.yaml"
    path.write_text(SCENARIO.replace("IMAGES", "{files: [p.png]}"))
    scenario = load_scenario(path)
    picture.write_text("now text")
    with pytest.raises(WorkloadError, match="bucket 'vision': images: .*not a PNG or JPEG"):
        Workload.from_spec(scenario.load, None, tmp_path)


def test_a_plan_keeps_the_images_and_an_api_option_cannot_drop_chat(tmp_path):
    (tmp_path / "p.png").write_bytes(synthetic_png(8, 8, "x"))
    path = tmp_path / "img.yaml"
    path.write_text(SCENARIO.replace("IMAGES", "{files: [p.png], count: 2}"))
    plan = load_plan(options(scenario=str(path)))  # the scenario's values are validated a second time here
    assert plan.load.buckets["vision"].images.files == ["p.png"] and plan.load.buckets["vision"].images.count == 2
    with pytest.raises(ScenarioError, match="buckets.vision.images: images travel in chat messages"):
        load_plan(options(scenario=str(path), api="completions"))
