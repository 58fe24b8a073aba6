"""The ladder's charts (``report.figures``) from a hand-built summary: which markers each chart carries, the
speed-up chart's reference line, and a chart that fails to build shows as a note, not a lost report."""

import xml.etree.ElementTree as ET

from locust_llm.analysis.documents.summary import VariantFigures
from locust_llm.report.figures import ladder_charts
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view

SVG = "{http://www.w3.org/2000/svg}"


def markers(svg) -> list[str]:
    return [e.text for e in ET.fromstring(str(svg)).iter(f"{SVG}text") if e.get("class") == "marker"]


def doc():
    def ladder():
        return [
            step(level, i, output_tps=50.0 * level, ttft_ms={"p50": 10.0 * level, "p95": 20.0 * level})
            for i, level in enumerate((1.0, 2.0, 4.0))
        ]

    levels = [compared(1.0, ratio(1.3, 1.2, 1.4)), compared(4.0, ratio(0.8, 0.7, 0.9))]
    d = summary({"base": ladder(), "spec": ladder()}, [comparison(levels, crossover_level=4.0)])
    d.variants["spec"] = VariantFigures(steps=d.variants["spec"].steps, saturation_level=2.0, knee_level=4.0)
    return d


def built(d):
    return ladder_charts(view(d), lambda _name, build: build())


def test_throughput_shows_saturation_knee_and_crossover_latency_only_the_knee():
    charts = built(doc())
    assert sorted(markers(charts["throughput"]["svg"])) == ["crossover spec", "knee spec", "saturation spec"]
    assert markers(charts["ttft"]["svg"]) == ["knee spec"]


def test_the_speedup_chart_has_its_no_gain_line():
    svg = str(built(doc())["speedup"]["svg"])
    assert "1x = no gain" in svg and markers(svg) == ["crossover spec"]


def test_a_chart_that_fails_becomes_a_note():
    failed = []

    def guard(name, build):
        failed.append(name)
        return None

    charts = ladder_charts(view(doc()), guard)
    assert "chart throughput" in failed
    assert "chart failed to render" in charts["throughput"]["svg"]
