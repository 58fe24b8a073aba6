"""Image requests in a real headless run against the reference server, whose per-image prefill cost is set: the
server's own log shows well-formed images of the configured size, and the reported TTFT difference with vs without
the images is that cost (the server's known delay is the truth)."""

import json

import pandas as pd
import pytest

from tests.helpers import assert_run_completed, run_locust

WIDTH, HEIGHT = 512, 512
MS_PER_KPX = 0.2
TRUTH_MS = MS_PER_KPX * WIDTH * HEIGHT / 1000  # 52.4 ms per request with one image
TOLERANCE_MS = 10.0  # the client's own noise on a shared 2-core machine; the transfer of ~30 kB adds well under 1 ms

SCENARIO = f"""
name: images
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  api: chat
  ladder: [2]
  step_duration_s: 8
  warmup_s: 1
  min_requests: 10
  buckets:
    vision: {{prompt_tokens: 16, max_tokens: 8, images: {{count: 1, width: {WIDTH}, height: {HEIGHT}, format: png}}}}
"""


def test_ttft_with_and_without_images_differs_by_the_servers_known_encode_cost(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.02", "--gap-s", "0.002", "--image-ms-per-kpx", str(MS_PER_KPX))
    scenario = tmp_path / "images.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", "img", timeout=180)
    assert_run_completed(done)
    run = tmp_path / "img"
    frame = pd.read_parquet(run / "requests.parquet")
    assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
    assert (frame["bucket"] == "vision").all() and frame["images"].notna().all()
    shown = frame["images"] > 0
    assert 0.3 < shown.mean() < 0.7, shown.mean()

    # The server's own log: every chat stream, with exactly the images the client recorded, each a PNG of the
    # configured size that cost the configured delay.
    logs = [log for log in server.all_logs() if log["api"] == "chat"]
    assert len(logs) == len(frame)
    with_images = [log for log in logs if log["images"]]
    assert len(with_images) == int(shown.sum())
    (nbytes,) = set(frame.loc[shown, "image_bytes"])
    for log in with_images:
        assert log["images"] == [{"mime": "image/png", "bytes": nbytes, "width": WIDTH, "height": HEIGHT}]
        assert log["image_delay_s"] * 1000 == pytest.approx(TRUTH_MS)
    assert all(log["image_delay_s"] == 0 for log in logs if not log["images"])

    summary = json.loads((run / "summary.json").read_text())
    (level,) = summary["images"]["levels"]
    assert (level["variant"], level["bucket"], level["level"]) == ("ref", "vision", 2.0)
    assert level["with_images"] > 20 and level["without_images"] > 20
    assert abs(level["overhead_ms"] - TRUTH_MS) < TOLERANCE_MS, level
    lo, hi = level["overhead_ci95"]
    assert 0 < lo <= level["overhead_ms"] <= hi
    assert level["prompt_tokens_with"] == level["prompt_tokens_without"] == 16  # the same text length
    print(
        f"TTFT P50 with {level['ttft_p50_with_ms']:.1f} ms, without {level['ttft_p50_without_ms']:.1f} ms, "
        f"added {level['overhead_ms']:.1f} ms [{lo:.1f}, {hi:.1f}], truth {TRUTH_MS:.1f} ms"
    )
    assert "Image requests: what the images add to TTFT" in (run / "report.html").read_text()
    assert "- Images: ref at 2 users, bucket vision" in (run / "summary.md").read_text()
    assert "images: ref at 2 users, bucket vision" in done.stdout + done.stderr
