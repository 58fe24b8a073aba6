"""The report's SVG helpers and template hygiene, without a browser."""

import math
import xml.etree.ElementTree as ET

import jinja2
from markupsafe import Markup

from locust_llm.analysis.timeline import downsample
from locust_llm.report.charts import Chart, HLine, Series, Span, VLine, line_chart, nice_ticks
from locust_llm.report.html import environment
from tests.helpers import REPO

SVG = "{http://www.w3.org/2000/svg}"
TEMPLATES = REPO / "locust_llm" / "report" / "templates"


def texts(svg: str) -> list[str]:
    return [e.text or "" for e in ET.fromstring(str(svg)).iter() if e.tag in (f"{SVG}text", f"{SVG}title")]


def test_chart_is_wellformed_svg_with_escaped_labels():
    evil = "<script>alert(1)</script>&\"'"
    svg = line_chart(
        [Series(evil, [1, 2, 4, 8], [10, 20, None, 35], lo=[9, 18, None, 30], hi=[11, 22, None, 40])],
        Chart(
            title=evil,
            x_label=evil,
            y_label=evil,
            log2_x=True,
            x_ticks=[1, 2, 4, 8],
            vlines=[VLine(4, evil)],
            hlines=[HLine(15, evil)],
        ),
    )
    assert isinstance(svg, Markup)
    root = ET.fromstring(str(svg))  # parses: every label was escaped
    assert root.tag == f"{SVG}svg"
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert sum(t == evil for t in texts(svg)) >= 5  # title, legend, axes, markers: shown verbatim as text
    assert "<script>" not in str(svg)


def test_missing_points_break_the_line_and_empty_charts_say_not_measured():
    svg = line_chart(
        [Series("a", [1, 2, 3, 4], [1.0, math.nan, None, 4.0])], Chart(title="t", x_label="x", y_label="y")
    )
    paths = [e for e in ET.fromstring(str(svg)).iter(f"{SVG}path") if e.get("stroke-width") == "1.8"]
    assert paths == []  # two isolated points: no segment joins them across the gap
    assert len([c for c in ET.fromstring(str(svg)).iter(f"{SVG}circle") if c.get("r") == "3"]) == 2
    empty = line_chart(
        [Series("a", [1, 2], [None, math.inf])], Chart(title="TPOT <b>", x_label="x", y_label="y", empty_note="no data")
    )
    assert "not measured" in empty and "<svg" not in empty and "&lt;b&gt;" in empty
    assert "not measured" in line_chart([], Chart(title="t", x_label="x", y_label="y"))


def test_log2_axis_ticks_are_the_levels():
    svg = line_chart(
        [Series("a", [1, 2, 4, 16], [1, 2, 3, 4])],
        Chart(title="t", x_label="users", y_label="y", log2_x=True, x_ticks=[1, 2, 4, 16]),
    )
    labels = texts(svg)
    for level in ("1", "2", "4", "16"):
        assert level in labels
    assert "users (log\u2082 scale)" in labels
    xs = {e.text: float(e.get("x")) for e in ET.fromstring(str(svg)).iter(f"{SVG}text") if e.text in ("1", "2", "4")}
    assert abs((xs["2"] - xs["1"]) - (xs["4"] - xs["2"])) < 0.2  # equal spacing per doubling


def test_wide_ci_is_clipped_with_a_marker():
    svg = line_chart(
        [Series("a", [1, 2], [1.2, 1.5], lo=[1.1, 0.2], hi=[1.3, 500.0])],
        Chart(title="t", x_label="x", y_label="y", log2_x=True, x_ticks=[1, 2]),
    )
    assert "CI to 500" in texts(svg)
    top = max(float(t) for t in texts(svg) if t.replace(".", "").isdigit())
    assert top < 10


def test_spans_shade_steps_and_label_groups():
    spans = [
        Span(0, 10, "1", "baseline", steady=2),
        Span(10, 20, "2", "baseline", steady=12),
        Span(25, 35, "1", "spec<x>", steady=27),
    ]
    svg = line_chart(
        [Series("baseline", [0, 5, 10, 15, 20], [0, 1, 1, 2, 2], points=False)],
        Chart(title="t", x_label="s", y_label="requests", spans=spans, width=900),
    )
    labels = texts(svg)
    assert "baseline" in labels and "spec<x>" in labels
    rects = list(ET.fromstring(str(svg)).iter(f"{SVG}rect"))
    assert len(rects) >= 1 + 3 + 3 + 1  # background, spans, warm-up overlays, frame


def test_nice_ticks_cover_the_range():
    for lo, hi in ((0, 1), (0, 2187.3), (0.0213, 0.0891), (5, 5), (-3, 7)):
        ticks = nice_ticks(lo, hi)
        assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) <= 12
    assert downsample(list(range(10)), list(range(10)), 5) == ([0.5, 2.5, 4.5, 6.5, 8.5], [0.5, 2.5, 4.5, 6.5, 8.5])


def test_templates_autoescape_and_never_mark_safe():
    env = environment()
    assert env.autoescape is True
    assert isinstance(env.undefined, type) and issubclass(env.undefined, jinja2.StrictUndefined)
    for path in TEMPLATES.glob("*.j2"):
        text = path.read_text()
        assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text
        assert "http://" not in text and "https://" not in text and "<script" not in text
        assert "<link" not in text and "@import" not in text and "url(" not in text
