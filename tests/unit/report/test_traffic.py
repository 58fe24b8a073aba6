"""Conversations and trace replay in the report (``report.traffic``) from hand-built documents: the rows by level,
variant and turn with their speed-ups, the trace section only for a replayed run, and the summary.md lines."""

from locust_llm.analysis.documents.conversations import ConversationSummary, Histories, TurnComparison, TurnLevel
from locust_llm.fmt import DASH
from locust_llm.report.traffic import conversations_section, trace_section, traffic_lines
from tests.unit.report.documents import ratio, step, summary, view


def conversations() -> ConversationSummary:
    levels = [
        TurnLevel(variant=variant, level=2.0, turn=turn, requests=10, ttft_p50_ms=50.0 * turn)
        for turn in (2, 1)
        for variant in ("spec", "base")
    ]
    faster = ratio(1.25, 1.1, 1.4)
    comparisons = [
        TurnComparison(
            variant="spec",
            level=2.0,
            turn=2,
            ttft_p50_speedup=faster,
            tpot_p50_speedup=faster,
            decode_tps_speedup=faster,
        )
    ]
    histories = [Histories(variant="spec", compared=4, diverged=1, text="1 of 4 histories diverged")]
    return ConversationSummary(turns=2, think_s=1.0, levels=levels, comparisons=comparisons, histories=histories)


def test_conversation_rows_are_by_level_variant_then_turn_with_the_turns_speedups():
    doc = summary({"base": [step(2.0)], "spec": [step(2.0)]}, conversations=conversations())
    section = conversations_section(view(doc))
    assert [(r["variant"], r["turn"]) for r in section["rows"]] == [("base", 1), ("base", 2), ("spec", 1), ("spec", 2)]
    assert section["rows"][3]["ttft_speedup"] == {"value": "1.25x", "ci": f"1.10x{DASH}1.40x", "state": "better"}
    assert section["rows"][2]["ttft_speedup"] is None  # turn 1 was not compared
    lines = traffic_lines(view(doc))
    assert lines[0].startswith("Conversations: spec at 2, turn 2: TTFT P50 speed-up 1.25x (1.10x")
    assert lines[1] == "Conversations: 1 of 4 histories diverged"


def test_no_conversations_no_section_and_no_trace_without_a_replayed_step():
    doc = summary({"base": [step(2.0)]})
    assert conversations_section(view(doc)) is None
    assert trace_section(view(doc, env={"workload": {"trace": {"file": "t.jsonl"}}})) is None
    assert traffic_lines(view(doc)) == []
