"""Speed-ups per content category on a synthetic run whose answer is set by construction: request k of a stream has
the same category in both variants (as the workload guarantees), code decodes twice as fast under speculation at
both levels, chat gains 5% at one stream and loses 20% at two; code's drafts are mostly accepted, chat's mostly not.
"""

import numpy as np
import pytest

from locust_llm.analysis.summary import build_summary
from locust_llm.pipeline import finish_run
from locust_llm.rundir import load_run
from tests.synthetic import stream_record, window, write_run

TOKENS = {"code": 40, "chat": 20}
# (variant, category) -> per-token seconds at each level
TPOT = {
    ("baseline", "code"): {1: 0.010, 2: 0.012},
    ("baseline", "chat"): {1: 0.010, 2: 0.012},
    ("spec", "code"): {1: 0.005, 2: 0.006},
    ("spec", "chat"): {1: 0.010 / 1.05, 2: 0.012 / 0.8},
}
DRAFTS = {"code": (32, 28), "chat": (16, 4)}  # drafted, accepted per request (the spec variant only)
WINDOW_S = 40.0  # long enough that a request mix of period 3 cannot hide a 10% drift


def category_of(seq: int) -> str:
    return "code" if seq % 3 else "chat"  # two code requests for each chat request


def category_run(path, rng, tpot_s=None):
    tpot_s = tpot_s or TPOT
    rows, steps, t = [], [], 1_800_000_000.0
    for step, level in enumerate((1, 2)):
        for variant in ("baseline", "spec"):
            steps.append(window(variant, step, level, t, WINDOW_S))
            for stream in range(level):
                send, seq = t + 0.003 * stream, 0
                while send < t + WINDOW_S:
                    category = category_of(seq)
                    tpot = tpot_s[(variant, category)][level] * rng.uniform(0.97, 1.03)
                    drafted, accepted = DRAFTS[category] if variant == "spec" else (None, None)
                    rows.append(
                        stream_record(
                            path.name,
                            variant,
                            level,
                            step,
                            send,
                            0.02,
                            tpot,
                            TOKENS[category],
                            worker=stream,
                            user=0,
                            seq=seq,
                            bucket=category,
                            request_id=f"{variant}-{step}-{stream}-{seq}",
                            draft_n=drafted,
                            draft_accepted=accepted,
                            # The server's own generation time: its clock counts every token at the same pace.
                            server_decode_ms=tpot * TOKENS[category] * 1000,
                        )
                    )
                    send += 0.02 + tpot * (TOKENS[category] - 1) + 0.001
                    seq += 1
            t += WINDOW_S + 5.0
    write_run(path, rows, steps)
    return path, rows


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path, rows = category_run(tmp_path_factory.mktemp("categories"), np.random.default_rng(5))
    return build_summary(load_run(path)).model_dump(mode="json"), rows


def test_each_category_gets_its_own_paired_speedup_with_an_interval_around_the_truth(built):
    summary, _ = built
    (comp,) = summary["categories"]
    assert (comp["baseline"], comp["variant"], comp["categories"]) == ("baseline", "spec", ["chat", "code"])
    for entry in comp["levels"]:
        level, category = int(entry["level"]), entry["category"]
        truth = TPOT[("baseline", category)][level] / TPOT[("spec", category)][level]  # decode tok/s = 1 / TPOT
        ratio = entry["decode_tps_speedup"]
        lo, hi = ratio["ci95"]
        assert lo <= truth <= hi, (level, category, ratio)
        assert ratio["value"] == pytest.approx(truth, rel=0.02)
        assert entry["tpot_p50_speedup"]["value"] == pytest.approx(truth, rel=0.03)
        # only the spec side's extra requests (it is faster) are left unpaired
        assert entry["pairs"] <= entry["requests"] and entry["pairs"] >= 10


def test_acceptance_per_category_comes_from_the_responses(built):
    summary, _ = built
    (comp,) = summary["categories"]
    for entry in comp["levels"]:
        drafted, accepted = DRAFTS[entry["category"]]
        acceptance = entry["acceptance"]
        assert acceptance["rate"] == pytest.approx(accepted / drafted)
        assert acceptance["rate_ci95"] == pytest.approx([accepted / drafted] * 2)  # every request alike
        assert acceptance["requests"] == entry["requests"]


def test_decode_rates_of_both_sides_from_the_client_and_from_the_servers_timings(built):
    """Each side's mean decode tok/s is 1 / TPOT (jittered by up to 3%), by the client's stamps and by the server's
    own per-request timings alike; the server's paired speed-up brackets the true one as the client's does."""
    summary, _ = built
    (comp,) = summary["categories"]
    for entry in comp["levels"]:
        level, category = int(entry["level"]), entry["category"]
        for side, suffix in (("spec", ""), ("baseline", "_baseline")):
            truth = 1 / TPOT[(side, category)][level]
            assert entry["decode_tps" + suffix] == pytest.approx(truth, rel=0.03)
            assert entry["server_decode_tps" + suffix] == pytest.approx(truth, rel=0.03)
        lo, hi = entry["server_decode_tps_speedup"]["ci95"]
        assert lo <= TPOT[("baseline", category)][level] / TPOT[("spec", category)][level] <= hi


def test_output_share_per_category_is_counted_from_the_requests(built):
    summary, rows = built
    (comp,) = summary["categories"]
    for entry in comp["levels"]:
        for side, key in (("spec", "output_share"), ("baseline", "output_share_baseline")):
            sent = [r for r in rows if r["variant"] == side and r["level"] == entry["level"]]
            mine = sum(r["output_tokens"] for r in sent if r["bucket"] == entry["category"])
            assert entry[key] == pytest.approx(mine / sum(r["output_tokens"] for r in sent))


def test_the_categories_that_differ_are_named_and_each_gets_its_advice(built):
    summary, _ = built
    (comp,) = summary["categories"]
    assert [(d["level"], d["highest"], d["lowest"], d["differ"]) for d in comp["differences"]] == [
        (1.0, "code", "chat", True),
        (2.0, "code", "chat", True),
    ]
    assert comp["text"].startswith("categories gain differently (95% intervals apart): at 1 concurrent streams code")
    assert comp["recommendations"]["code"].startswith(
        "enable spec for code at every level judged, up to 2 concurrent streams"
    )
    assert comp["recommendations"]["chat"].startswith("enable spec for chat up to 1 concurrent streams")
    assert "disable from 2" in comp["recommendations"]["chat"]


def test_overlapping_intervals_are_reported_as_no_difference(tmp_path):
    """Both categories gain the same 1.3x: the sentence says no category differs, naming the extremes."""
    same = {key: dict(levels) for key, levels in TPOT.items()}
    for category in ("code", "chat"):
        same[("spec", category)] = {level: same[("baseline", category)][level] / 1.3 for level in (1, 2)}
    path, _ = category_run(tmp_path, np.random.default_rng(6), same)
    (comp,) = build_summary(load_run(path)).model_dump(mode="json")["categories"]
    assert not any(d["differ"] for d in comp["differences"])
    assert comp["text"].startswith("no category's gain clearly differs from another's: every pair of 95% intervals")
    for entry in comp["levels"]:
        lo, hi = entry["decode_tps_speedup"]["ci95"]
        assert lo <= 1.3 <= hi


def test_the_report_and_summary_md_show_the_category_table(tmp_path):
    path, _ = category_run(tmp_path, np.random.default_rng(5))
    finish_run(path)
    html = (path / "report.html").read_text()
    assert "Per content category" in html and "where to enable it" in html
    assert "enable spec for code at every level judged" in html
    md = (path / "summary.md").read_text()
    assert "- categories (spec vs baseline): categories gain differently" in md
    assert "- category chat: enable spec for chat up to 1 concurrent streams" in md
