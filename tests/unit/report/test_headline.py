"""The verdict cards and warnings (``report.headline``) from hand-built summaries: which level a card speaks for,
what its state is, which warnings come first, and that the HTML shows server and scenario text as text."""

import xml.etree.ElementTree as ET

from locust_llm.analysis.documents.quality import Agreement
from locust_llm.fmt import DASH
from locust_llm.report.headline import headline
from locust_llm.report.html import render_verdict
from locust_llm.rundir.events import Interrupted, ServerRestarted
from tests.synthetic import EVIL_VARIANT, PAYLOAD
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view

LEVELS = (1.0, 2.0, 4.0)


def pair(speedups, statuses=("clean", "clean", "clean"), **comparison_fields):
    """Baseline ``base`` and variant ``spec`` on three levels; the comparison's levels carry ``speedups``."""
    steps = {name: [step(level, i) for i, level in enumerate(LEVELS)] for name in ("base", "spec")}
    levels = [
        compared(level, speed, status=status) for level, speed, status in zip(LEVELS, speedups, statuses, strict=True)
    ]
    return summary(steps, [comparison(levels, **comparison_fields)])


def test_a_speedup_whose_interval_straddles_1_is_not_called_faster():
    doc = pair([ratio(1.07, 0.96, 1.19), ratio(1.3, 1.2, 1.4), ratio(1.2, 1.1, 1.3)])
    (card,) = headline(view(doc)).cards
    assert card.state == "unclear"
    assert (card.level, card.speedup) == ("1", "1.07x")  # the lowest level, whatever the higher ones say
    assert card.ci == f"0.96x{DASH}1.19x"
    html = render_verdict(view(doc))
    assert "not distinguishable from the noise" in html
    assert "faster beyond the noise" not in html


def test_a_card_speaks_for_the_lowest_level_measured_cleanly():
    # Level 1 was contended (left out of every verdict): the card reads level 2, whose whole interval is above 1.
    doc = pair(
        [ratio(3.0, 2.5, 3.5), ratio(1.3, 1.2, 1.4), ratio(0.8, 0.7, 0.9)], statuses=("contended", "clean", "clean")
    )
    (card,) = headline(view(doc)).cards
    assert (card.state, card.level, card.speedup) == ("better", "2", "1.30x")
    badges = {b.level: b for b in card.levels}
    assert badges["1"].status == "contended" and badges["1"].speedup is None  # shown, without a figure
    assert badges["4"].speedup == "0.80x"


def test_an_inconclusive_lowest_level_leaves_the_verdict_unclear():
    doc = pair([ratio(1.5, 1.3, 1.7)] * 3, statuses=("inconclusive", "clean", "clean"))
    (card,) = headline(view(doc)).cards
    assert (card.level, card.speedup, card.state) == ("1", "1.50x", "unclear")


def test_the_crossover_sentence_names_the_level_and_both_variants():
    doc = pair([ratio(1.3, 1.2, 1.4), ratio(1.0, 0.9, 1.1), ratio(0.7, 0.6, 0.8)], crossover_level=4.0)
    (card,) = headline(view(doc)).cards
    assert card.crossover.startswith("crossover at 4 concurrent streams")
    assert "spec is slower than base" in card.crossover


def test_a_consistency_defect_is_the_first_warning():
    doc = pair([ratio(1.3, 1.2, 1.4)] * 3)
    doc.consistency["spec"] = Agreement(compared=8, identical=5, agreement=5 / 8, defect=True)
    doc.events.append(
        ServerRestarted(
            t=1.0,
            variant="spec",
            step=0,
            level=1,
            t_start=0.5,
            t_end=1.0,
            down_s=0.5,
            old_url="http://127.0.0.1:1",
            new_url="http://127.0.0.1:1",
            same_port=True,
        )
    )
    head = headline(view(doc))
    assert head.cards[0].defect
    assert head.warnings[0].startswith("consistency defect: spec's greedy output differs from base's")
    assert head.warnings[-1] == "1 run event(s): server_restarted"


def test_an_interrupted_run_warns_before_anything_else():
    doc = pair([ratio(1.3, 1.2, 1.4)] * 3)
    doc.variants["spec"].steps[0] = step(1.0, 0, status="unsteady", status_reasons=["unsteady: throughput drifted"])
    doc.events.append(Interrupted(t=0.0, signal="SIGINT", step=0, variant="spec"))
    warnings = headline(view(doc)).warnings
    assert warnings[0] == (
        "interrupted at 1970-01-01 00:00:00 UTC by SIGINT: every figure covers only what was measured until then"
    )
    assert any(w.startswith("1 step(s) not steady") and "spec @ 1 (throughput drifted)" in w for w in warnings)


def test_one_variant_gives_a_note_instead_of_cards():
    head = headline(view(summary({"base": [step(1.0)]})))
    assert head.cards == () and head.note.startswith("single variant")


def test_scenario_and_server_text_shows_as_text_in_the_verdict():
    doc = pair([ratio(1.3, 1.2, 1.4)] * 3, variant=EVIL_VARIANT, recommendation=PAYLOAD)
    doc.variants[EVIL_VARIANT] = doc.variants.pop("spec")
    html = render_verdict(view(doc))
    root = ET.fromstring(f"<div>{html.replace('&mdash;', '-')}</div>")  # parses: nothing broke out of its element
    assert not [e for e in root.iter() if e.tag in ("script", "svg", "img")]
    texts = "".join(root.itertext())
    assert PAYLOAD in texts and EVIL_VARIANT in texts  # shown verbatim, as text
