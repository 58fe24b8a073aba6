"""What images add to TTFT, on synthetic runs whose answer is set by construction: the figures in summary.json, the
report section, summary.md and the console line; and nothing about images for a run without them."""

import numpy as np
import pytest

from locust_llm.pipeline import finish_run
from tests.synthetic import stream_record, window, write_run

TTFT_WITH_S, TTFT_WITHOUT_S = 0.080, 0.030  # 50 ms of image encoding


def image_run(path, images: bool):
    """Level 2, one step: a 'vision' bucket alternating requests with one 20 kB image and text-only twins, and a
    'text' bucket without images. The TTFTs are the same spread of values shifted by the bucket's base."""
    rows, start = [], 1_800_000_000.0
    jitter = np.linspace(0.0, 0.004, 40)
    for k in range(len(jitter)):
        send = start + 0.2 * k
        shown = k % 2 == 0
        ttft = (TTFT_WITH_S if shown else TTFT_WITHOUT_S) + jitter[k // 2 * 2]  # the same jitter on both sides
        fields = {"images": 1 if shown else 0, "image_bytes": 20_000 if shown else 0} if images else {}
        rows.append(
            stream_record(
                path.name,
                "baseline",
                2.0,
                0,
                send,
                ttft,
                0.01,
                8,
                bucket="vision",
                prompt_tokens=64 if shown else 40,
                worker=0,
                seq=k,
                **fields,
            )
        )
        rows.append(
            stream_record(
                path.name,
                "baseline",
                2.0,
                0,
                send + 0.1,
                0.02,
                0.01,
                8,
                bucket="text",
                prompt_tokens=40,
                worker=1,
                seq=k,
            )
        )
    return write_run(path, rows, [window("baseline", 0, 2.0, start, 10.0)])


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    return finish_run(image_run(tmp_path_factory.mktemp("images"), images=True))


def test_the_overhead_is_the_difference_of_the_p50s_with_its_interval(outcome):
    (level,) = outcome.summary.images.levels  # the 'text' bucket has no images: not a row
    assert (level.variant, level.bucket, level.level, level.steps) == ("baseline", "vision", 2.0, [0])
    assert (level.with_images, level.without_images) == (20, 20)
    assert level.overhead_ms == pytest.approx((TTFT_WITH_S - TTFT_WITHOUT_S) * 1000, abs=1e-3)  # float64 clock
    lo, hi = level.overhead_ci95
    assert lo <= 50.0 <= hi and hi - lo < 5.0
    assert level.ttft_p50_without_ms == pytest.approx(TTFT_WITHOUT_S * 1000 + 2.0, abs=0.2)
    assert (level.images_per_request, level.image_bytes) == (1.0, 20_000.0)
    assert (level.prompt_tokens_with, level.prompt_tokens_without) == (64.0, 40.0)
    assert "add +50.0 ms to TTFT P50" in level.text and "same text length" in level.text


def test_the_report_summary_md_and_console_state_it(outcome):
    run_dir = outcome.report.parent
    html = outcome.report.read_text()
    assert "Image requests: what the images add to TTFT" in html
    assert outcome.summary.images.levels[0].text.split(":")[0] in html
    assert "- Images: " in (run_dir / "summary.md").read_text()
    assert "images: baseline at 2 users, bucket vision" in outcome.text


def test_nothing_about_images_without_them(tmp_path):
    (tmp_path / "plain").mkdir()
    plain = finish_run(image_run(tmp_path / "plain", images=False))
    assert plain.summary.images is None
    assert '"images"' not in (tmp_path / "plain" / "summary.json").read_text().replace('"images": null', "")
    assert "Image requests" not in plain.report.read_text()
    assert "Images" not in (tmp_path / "plain" / "summary.md").read_text()
    assert "images:" not in plain.text
