"""A real run against the CPU llama.cpp server: its report is self-contained and renders in real Chromium."""

import base64
import json

import pytest

from locust_llm.pipeline import finish_run
from tests.browser import assert_inert
from tests.helpers import require_llama_server, run_locust

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    require_llama_server()
    out = tmp_path_factory.mktemp("report-runs")
    done = run_locust(
        out,
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--ladder",
        "1,2,4",
        "--step-duration",
        "4",
        "--warmup",
        "1",
        "--run-id",
        "report",
        timeout=400,
    )
    run_dir = out / "report"
    # The exit code is the nightly gates' business (SLO / regression codes); this test needs the run directory.
    for name in ("summary.json", "steps.json", "env.json", "requests.parquet"):
        assert (run_dir / name).exists(), f"{name} missing (rc={done.returncode}): {done.stderr[-3000:]}"
    path = finish_run(run_dir).report
    return run_dir, path


def test_real_report_is_self_contained(real_run):
    run_dir, path = real_run
    text = path.read_text()
    assert path == run_dir / "report.html"
    assert "could not be rendered" not in text
    assert_inert(text)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        "http://127.0.0.1", ""
    )  # the only URLs are the SVG namespace and the server's local address (text)
    assert "https://" not in text
    summary = json.loads((run_dir / "summary.json").read_text())
    (comparison,) = summary["comparisons"]
    assert str(__import__("markupsafe").escape(comparison["recommendation"])) in text
    assert text.count("<svg") >= 7


def test_real_report_in_chromium(real_run, browser, tmp_path):
    run_dir, path = real_run
    browser.load(path.as_uri())
    assert browser.problems() == []
    urls = browser.requests()
    assert urls and all(u.startswith(("file://", "data:")) for u in urls), urls
    dom = browser.evaluate("""(() => ({
        title: document.title,
        svgs: document.querySelectorAll('svg.chart').length,
        paths: document.querySelectorAll('svg.chart path, svg.chart circle').length,
        scripts: document.querySelectorAll('script').length,
        sections: [...document.querySelectorAll('section[id]')].map(s => s.id),
        ladderRows: document.querySelectorAll('#ladder tbody tr').length,
        width: document.documentElement.scrollWidth,
        verdict: document.querySelector('#verdict .rec') && document.querySelector('#verdict .rec').innerText,
    }))()""")
    assert dom["title"] == "locust-llm report \u2014 report"
    assert dom["svgs"] >= 7 and dom["paths"] > 20 and dom["scripts"] == 0
    assert {
        "verdict",
        "conditions",
        "charts",
        "ladder",
        "speedup",
        "consistency",
        "validity",
        "events",
        "telemetry",
        "method",
    } <= set(dom["sections"])
    assert (
        dom["ladderRows"] == 2 * 3 * 3
    )  # three tables per variant (latency, latency of all, throughput), three levels
    assert dom["width"] <= 1280  # nothing overflows the page sideways
    (comparison,) = json.loads((run_dir / "summary.json").read_text())["comparisons"]
    assert comparison["recommendation"] in dom["verdict"]
    browser.screenshot(tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
    pdf = browser.call("Page.printToPDF", {"printBackground": True})
    assert len(base64.b64decode(pdf["data"])) > 10_000
    assert browser.problems() == []
