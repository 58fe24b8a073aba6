"""report.html, steps.csv and summary.md: a real run rendered in real headless Chromium, escaping of
server-supplied strings, graceful rendering of sparse run directories, and exports equal to summary.json."""

import csv
import json
import math
import typing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel

from locust_llm.analysis.documents.summary import Summary, Verdict
from locust_llm.analysis.timeline import Timeline
from locust_llm.fmt import md
from locust_llm.pipeline import finish_run
from locust_llm.report import ReportInput, RunView, write_report
from locust_llm.report.exports import step_rows, steps_csv, summary_markdown
from locust_llm.report.html import render_html
from locust_llm.rundir.env import RunEnv
from tests.browser import assert_inert
from tests.synthetic import EVIL_VARIANT, PAYLOAD, hostile_run, minimal_run

HOSTILE_VERDICT = Verdict.model_validate(
    {
        "exit_code": 3,
        "reasons": {"3": [f"{EVIL_VARIANT} @ 1: ttft_p99_ms 25 > 1 {PAYLOAD}"]},
        "checks": [
            {
                "gate": f"ttft_p99_ms{PAYLOAD}",
                "variant": EVIL_VARIANT,
                "level": 1.0,
                "value": 25.0,
                "limit": 1.0,
                "ok": False,
            }
        ],
    }
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = hostile_run(tmp_path_factory.mktemp("hostile"))
    outcome = finish_run(path)
    # The report presents whatever verdict it is given: one whose texts carry markup must show them as text.
    inp = ReportInput(
        summary=outcome.summary,
        env=RunEnv.model_validate_json((path / "env.json").read_text()),
        timeline=outcome_timeline(path),
        verdict=HOSTILE_VERDICT,
        run_name=path.name,
    )
    write_report(path, inp)
    return path


def outcome_timeline(path: Path) -> Timeline:
    from locust_llm.analysis.summary import build_summary
    from locust_llm.analysis.timeline import build_timeline
    from locust_llm.rundir import load_run

    run = load_run(path)
    return build_timeline(run, RunView.variant_order(build_summary(run), run.env))


def test_server_strings_are_escaped(hostile):
    text = (hostile / "report.html").read_text()
    assert "could not be rendered" not in text
    assert_inert(text)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    # model name, error message, consistency text, log tail, command line: each shown, as text
    for needle in (
        f"evil{escaped}",
        f"upstream said {escaped}",
        f"text 0 {escaped}",
        f"fatal: {escaped}",
        "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;",
    ):
        assert needle in text, needle
    assert "<script" not in text.lower() and "<img" not in text.lower() and "<svg onload" not in text.lower()
    summary_md = (hostile / "summary.md").read_text()
    assert "<" not in summary_md and "&lt;script&gt;alert(1)" in summary_md


def test_escaped_strings_do_not_run_in_chromium(hostile, browser):
    browser.load((hostile / "report.html").as_uri())
    assert browser.problems() == []  # no alert dialog, no error, no CSP violation
    assert all(u.startswith(("file://", "data:")) for u in browser.requests())
    dom = browser.evaluate("""(() => ({
        title: document.title,
        injected: document.querySelectorAll('script, img, iframe, object, embed, svg [onload], [onerror]').length,
        handlers: [...document.querySelectorAll('*')]
            .filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
        text: document.body.innerText,
        svgs: document.querySelectorAll('svg.chart').length,
    }))()""")
    assert dom["title"] == "locust-llm report \u2014 hostile"
    assert dom["injected"] == 0 and dom["handlers"] == 0
    assert PAYLOAD in dom["text"] and EVIL_VARIANT in dom["text"]  # shown to the reader as text
    assert dom["svgs"] >= 7


def test_hostile_report_flags_what_went_wrong(hostile):
    text = (hostile / "report.html").read_text()
    # One greedy check: the diverged consistency prompt named; the synthetic baseline was not asked twice.
    assert "DEFECT: diverged" in text and "Greedy check: " in text and "DIVERGED on consistency prompt" in text
    assert "the baseline was not asked twice, so the cause is unknown" in text
    assert "server_exited" in text
    assert "http_error" in text
    assert "Nightly gates: exit code 3 (an SLO or quality gate failed)" in text and "ttft_p99_ms&lt;script&gt;" in text


# -- graceful with little data ------------------------------------------------------------------------------
def test_minimal_run_renders_with_not_measured_notes(tmp_path):
    run_dir = minimal_run(tmp_path)
    path = finish_run(run_dir).report
    text = path.read_text()
    assert "could not be rendered" not in text
    assert_inert(text)
    assert "single variant: no baseline-vs-variant comparison was measured" in text
    assert "server telemetry over time: not measured" in text
    assert "consistency: not measured" in text
    assert "speed-up: not measured" in text
    assert "all failed" in text  # the failed step is marked
    assert "connection refused" in text
    rows = list(csv.DictReader((run_dir / "steps.csv").open()))
    assert [(r["variant"], r["level"]) for r in rows] == [("baseline", "1.0"), ("baseline", "2.0")]
    assert rows[1]["error_rate"] == "1.0"


def strip_optional(value):
    """Every figure that the schema allows to be missing, missing (None), at every depth."""
    if isinstance(value, BaseModel):
        updates = {}
        for name, field in type(value).model_fields.items():
            inner = getattr(value, name)
            nullable = type(None) in typing.get_args(field.annotation)
            updates[name] = None if nullable else strip_optional(inner)
        return value.model_copy(update=updates)
    if isinstance(value, list):
        return [strip_optional(v) for v in value]
    if isinstance(value, dict):
        return {k: strip_optional(v) for k, v in value.items()}
    return value


def sparse_summaries(summary: dict) -> list[Summary]:
    """Valid summaries with every optional figure missing, and degenerate shapes."""
    return [
        strip_optional(Summary.model_validate(summary)),
        Summary(generated_at="now", records=0),
        Summary.model_validate(
            {
                "generated_at": "now",
                "records": 0,
                "variants": {"x": {"steps": [{"step": 0, "level": 1, "mode": "closed"}]}},
                "comparisons": [
                    {
                        "baseline": "b",
                        "variant": "x",
                        "metric": "output_tps",
                        "recommendation": "",
                        "steps": [
                            {
                                "level": 1,
                                **{
                                    k: {}
                                    for k in (
                                        "output_tps_speedup",
                                        "decode_tps_speedup",
                                        "tpot_p50_speedup",
                                        "tpot_p95_speedup",
                                        "ttft_p95_speedup",
                                    )
                                },
                            }
                        ],
                    }
                ],
                "consistency": {"x": {"prompts": [{"status": "error"}]}},
                "events": [{"kind": "x"}, {"kind": "server_exited", "t": None, "variant": "", "log_tail": ""}],
            }
        ),
    ]


def test_empty_and_missing_figures_never_crash(tmp_path, hostile):
    summary = json.loads((hostile / "summary.json").read_text())
    for sparse in sparse_summaries(summary):
        for env in (RunEnv(), RunEnv.model_validate_json((hostile / "env.json").read_text())):
            view = RunView(ReportInput(summary=sparse, env=env, timeline=Timeline(None)))
            text = render_html(view)
            assert "could not be rendered" not in text, sparse
            assert "n/m" in text or "not measured" in text
            steps_csv(sparse)
            summary_markdown(view)
    empty = tmp_path / "empty"
    empty.mkdir()
    inp = ReportInput(summary=Summary(generated_at="now", records=0), env=RunEnv(), timeline=Timeline(None))
    assert "locust-llm report" in write_report(empty, inp).read_text()


# -- exports -----------------------------------------------------------------------------------------------
def _leaves(value, skip=("acceptance", "window", "t_from", "t_to")):
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                yield from _leaves(v, skip)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, skip)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_steps_csv_equals_summary(hostile):
    summary = json.loads((hostile / "summary.json").read_text())
    frame = pd.read_csv(hostile / "steps.csv")
    expected = [(v, s["level"]) for v in ("baseline", EVIL_VARIANT) for s in summary["variants"][v]["steps"]]
    assert list(zip(frame["variant"], frame["level"], strict=False)) == expected
    comparison = {s["level"]: s for s in summary["comparisons"][0]["steps"]}
    for _, row in frame.iterrows():
        step = next(s for s in summary["variants"][row["variant"]]["steps"] if s["level"] == row["level"])
        assert row["ttft_ms_p95"] == step["ttft_ms"]["p95"]
        assert row["tpot_ms_p50_ci95_hi"] == step["tpot_ms"]["ci95"]["p50"][1]
        assert row["output_tps"] == step["output_tps"]
        assert row["output_tps_ci95_lo"] == step["output_tps_ci95"][0]
        assert row["requests"] == step["requests"] and row["errors"] == step["errors"]
        assert row["error_rate"] == step["error_rate"]
        if row["variant"] == EVIL_VARIANT:
            speed = comparison[row["level"]]["output_tps_speedup"]
            assert row["speedup_output_tps"] == speed["value"]
            assert row["speedup_output_tps_ci95_hi"] == speed["ci95"][1]
        else:
            assert math.isnan(row["speedup_output_tps"])
        # every number of the step is somewhere in its row, exactly
        cells = {float(v) for v in row.to_numpy() if isinstance(v, (int, float, np.number)) and not pd.isna(v)}
        assert {float(v) for v in _leaves(step)} <= cells


def test_summary_md_pastes_into_a_ticket(hostile):
    summary = json.loads((hostile / "summary.json").read_text())
    text = (hostile / "summary.md").read_text()
    (comparison,) = summary["comparisons"]
    assert md(comparison["recommendation"]) in text
    assert "Recommendation:" in text and "**Conditions**" in text
    assert "**greedy check**" in text and "DIVERGED on consistency prompt" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(table_rows) == 2 * 3
    assert all(line.count(" | ") == table_rows[0].count(" | ") for line in table_rows[:3])


def test_csv_rows_one_per_variant_and_level(hostile):
    rows = step_rows(Summary.model_validate_json((hostile / "summary.json").read_text()))
    assert len(rows) == 6 and len({(r["variant"], r["level"]) for r in rows}) == 6
    with (hostile / "steps.csv").open() as handle:
        header = next(csv.reader(handle))
    assert header[:4] == ["variant", "is_baseline", "step", "level"] and len(header) == len(set(header))


@pytest.mark.parametrize(
    "exact, said",
    [
        (False, "approximate (no tokenizer answered)"),
        (True, "exact (counted by the server&#39;s or a named tokenizer)"),
    ],
)
def test_the_conditions_say_whether_prompt_lengths_were_exact(tmp_path, exact, said):
    run_dir = minimal_run(tmp_path)
    env = json.loads((run_dir / "env.json").read_text())
    env["load"] = {"prompt_tokens": 128, "max_tokens": 64}
    env["workload"] = {"exact": exact}
    (run_dir / "env.json").write_text(json.dumps(env))
    text = finish_run(run_dir).report.read_text()
    assert said in text
    assert ("128\u219264 tokens (prompt lengths approximate)" in text) is (not exact)
