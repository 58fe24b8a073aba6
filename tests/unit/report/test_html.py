"""``report.html`` (``report.html``): one section that fails costs that section only, shown as a visible note,
and the verdict the web UI shows alone is the report's own."""

from locust_llm.report import html
from locust_llm.report.html import build_context, render_html, render_verdict
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view


def doc():
    steps = {name: [step(1.0, 0, output_tps=100.0)] for name in ("base", "spec")}
    return summary(steps, [comparison([compared(1.0, ratio(1.3, 1.2, 1.4))])])


def test_a_failing_section_becomes_a_note_and_the_rest_still_renders(monkeypatch):
    def broken(_view):
        raise ValueError("odd figure")

    monkeypatch.setattr(html.sections, "gates", broken)
    context = build_context(view(doc()))
    assert context["gates"] is None and context["failures"] == ["gates: ValueError: odd figure"]
    page = render_html(view(doc()))
    assert "Parts of this report could not be rendered" in page and "odd figure" in page
    assert render_verdict(view(doc())) in page  # the verdict cards are still there, whole


def test_the_page_forbids_scripts_and_fetches():
    page = render_html(view(doc()))
    assert "Content-Security-Policy" in page and "<script" not in page
