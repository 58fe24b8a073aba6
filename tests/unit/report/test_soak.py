"""The soak in the report (``report.soak``) from a hand-built soak summary: the headline sentence, the gates'
count, and the fitted trend line drawn from the first to the last fitted window."""

from locust_llm.analysis.documents.soak import SoakCheck, SoakSummary, SoakTrend, SoakWindow
from locust_llm.report.soak import _fit_line, gates_text, headline, soak_lines
from tests.unit.report.documents import step, summary


def soak(**fields) -> SoakSummary:
    windows = [SoakWindow(window=i, step=0, start_s=600.0 * i, end_s=600.0 * (i + 1), requests=100) for i in range(3)]
    windows[2] = windows[2].model_copy(update={"complete": False, "requests": 40})
    windows[0] = windows[0].model_copy(update={"complete": True})
    windows[1] = windows[1].model_copy(update={"complete": True})
    return SoakSummary.model_validate(
        {
            "variant": "spec",
            "level": 4.0,
            "mode": "closed",
            "duration_s": 7200.0,
            "window_s": 600.0,
            "windows_planned": 12,
            "measured_s": 1800.0,
            "requests": 200,
            "error_rate": 0.0125,
            "windows": windows,
            **fields,
        }
    )


def check(ok: bool, judged: bool = True) -> SoakCheck:
    return SoakCheck(gate="max_ttft_growth_pct_per_h", figure="ttft_p99_ms", limit=10.0, ok=ok, judged=judged, text="")


def test_the_headline_says_how_long_of_how_long_and_how_many_windows_finished():
    text = headline(soak(checks=[check(True)]))
    assert text.startswith("spec held at 4 concurrent streams for 30 min of 2 h in windows of 10 min")
    assert "(2 of 12 windows finished)" in text
    assert "240 requests (200 in the windows the trends use)" in text
    assert "error rate 1.25%" in text and text.endswith("every soak gate holds")


def test_the_gates_are_counted_held_failed_and_not_judged():
    assert gates_text(soak(checks=[check(True), check(False), check(False, judged=False)])) == (
        "soak gates: 1 hold, 1 failed, 1 not judged"
    )


def test_the_trend_line_runs_from_the_first_to_the_last_fitted_window():
    trend = SoakTrend(
        figure="ttft_p99_ms", label="TTFT P99", unit="ms", worse="up", reference=200.0, slope_per_hour=20.0
    )
    assert _fit_line(trend, "#000") is None  # no fitted span: nothing to draw
    line = _fit_line(trend.model_copy(update={"from_h": 0.5, "to_h": 2.0}), "#000")
    assert list(line.x) == [30.0, 120.0]  # minutes
    assert list(line.y) == [200.0, 230.0]  # 20 per hour over 1.5 h


def test_no_soak_no_lines():
    assert soak_lines(summary({"base": [step(1.0)]})) == []
