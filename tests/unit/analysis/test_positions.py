"""Decode speed by output position on a synthetic run whose pace is set token by token: the baseline slows down
linearly over a 1,024-token answer (one token per chunk); the speculative variant sends one verification pass of
three tokens per chunk (2 of 4 drafts accepted) until token 600, then loses the thread: one token per chunk, no
draft accepted, at a slower pace. Per-chunk draft counts are recorded as llama.cpp's per-token timings give them."""

import numpy as np
import pytest

from locust_llm.analysis.summary import build_summary
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from locust_llm.rundir import load_run
from tests.synthetic import patch_env, window, write_run

TOKENS, BIN = 1024, 256
BASE_GAP = 0.004  # s per token at the start; +50% by the last token
SPEC_PASS, SWITCH, SPEC_LATE_GAP = 0.006, 600, 0.0065  # a 3-token pass, the token where drafting fails, the gap after
WINDOW_S = 60.0


def base_chunks(scale: float) -> tuple[np.ndarray, list[int], list[int], list[int]]:
    gaps = BASE_GAP * scale * (1 + 0.5 * np.arange(1, TOKENS) / TOKENS)
    offsets = 0.02 + np.concatenate([[0.0], np.cumsum(gaps)])
    return offsets, [1] * TOKENS, [], []


def spec_chunks(scale: float) -> tuple[np.ndarray, list[int], list[int], list[int]]:
    """First chunk 1 token (the prefill drafts nothing); 3-token passes up to token 600; then 1 token a chunk."""
    tokens, drafted, accepted, t, times = [1], [0], [0], 0.02, [0.02]
    done = 1
    while done < TOKENS:
        early = done < SWITCH
        n = min(3 if early else 1, TOKENS - done)
        t += (SPEC_PASS if early else SPEC_LATE_GAP) * scale
        tokens.append(n)
        drafted.append(drafted[-1] + 4)
        accepted.append(accepted[-1] + (2 if early else 0))
        times.append(t)
        done += n
    return np.array(times), tokens, drafted, accepted


def record(variant: str, step: int, send: float, seq: int, scale: float) -> dict:
    offsets, tokens, drafted, accepted = (spec_chunks if variant == "spec" else base_chunks)(scale)
    return RequestRecord(
        run_id="positions",
        variant=variant,
        level=1,
        step=step,
        phase="steady",
        seq=seq,
        worker=0,
        request_id=f"{variant}-{seq}",
        output_tokens=TOKENS,
        token_source="server_events",
        t_send=send,
        t_first=send + offsets[0],
        t_end=send + offsets[-1],
        t_done=send + offsets[-1],
        chunk_offsets=offsets.tolist(),
        chunk_tokens=tokens,
        chunk_drafted=drafted,
        chunk_accepted=accepted,
        draft_n=drafted[-1] if drafted else None,
        draft_accepted=accepted[-1] if accepted else None,
        finish_reason="length",
        http_status=200,
    ).to_dict()


def positions_run(path, rng):
    rows, steps, t = [], [], 1_800_000_000.0
    scales = rng.uniform(0.9, 1.1, 200)  # request k is as hard in both variants (the same prompt)
    for variant in ("baseline", "spec"):
        steps.append(window(variant, 0, 1, t, WINDOW_S))
        send, seq = t, 0
        while send < t + WINDOW_S:
            rows.append(record(variant, 0, send, seq, scales[seq]))
            send = rows[-1]["t_end"] + 0.001
            seq += 1
        t += WINDOW_S + 10.0
    write_run(path, rows, steps)
    patch_env(path, "load", positions={"bin_tokens": BIN, "acceptance": True}, min_requests=10)
    return path, rows


def token_times(row: dict) -> np.ndarray:
    """Each output token's arrival: its chunk's time (the definition, spelled out token by token)."""
    return np.repeat(np.asarray(row["chunk_offsets"]), row["chunk_tokens"])


def bin_speed(row: dict, k: int) -> float:
    t = token_times(row)
    if k == 0:
        return (BIN - 1) / (t[BIN - 1] - t[0])
    return BIN / (t[(k + 1) * BIN - 1] - t[k * BIN - 1])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path, rows = positions_run(tmp_path_factory.mktemp("positions"), np.random.default_rng(11))
    return build_summary(load_run(path)).model_dump(mode="json"), rows


def curve_of(summary: dict, variant: str) -> dict:
    return next(c for c in summary["positions"]["curves"] if c["variant"] == variant)


def test_each_bin_is_the_mean_of_the_requests_speeds_over_it(built):
    summary, rows = built
    assert summary["positions"]["bin_tokens"] == BIN
    for variant in ("baseline", "spec"):
        mine = [r for r in rows if r["variant"] == variant]
        bins = curve_of(summary, variant)["bins"]
        assert [(b["first_token"], b["last_token"]) for b in bins] == [(0, 255), (256, 511), (512, 767), (768, 1023)]
        for k, b in enumerate(bins):
            speeds = [bin_speed(r, k) for r in mine]
            assert b["requests"] == len(mine)
            assert b["decode_tps"] == pytest.approx(np.mean(speeds), rel=1e-4)
            lo, hi = b["decode_tps_ci95"]
            assert lo < b["decode_tps"] < hi
    # the step carries the same curve (one clean step per variant)
    step = summary["variants"]["baseline"]["steps"][0]
    assert [b["decode_tps"] for b in step["decode_by_position"]] == [
        b["decode_tps"] for b in curve_of(summary, "baseline")["bins"]
    ]


def test_the_drop_from_the_first_bin_to_the_last_is_paired_and_said_in_one_line(built):
    summary, rows = built
    base = curve_of(summary, "baseline")
    # every request slows by the same factor, so the ratio of means is the per-request ratio
    row = next(r for r in rows if r["variant"] == "baseline")
    truth = bin_speed(row, 3) / bin_speed(row, 0)
    change = base["last_vs_first"]
    assert change["value"] == pytest.approx(truth, rel=1e-3)
    assert change["ci95"][0] <= truth <= change["ci95"][1]
    assert change["pairs"] == len([r for r in rows if r["variant"] == "baseline"])
    assert base["text"].startswith(
        f"baseline at 1 concurrent streams: decode speed at tokens 768-1,024 is {change['value']:.2f}x of tokens 0-256 "
        "(95% CI "
    )
    assert summary["positions"]["text"] == [base["text"], curve_of(summary, "spec")["text"]]


def test_acceptance_by_position_from_per_token_draft_counts(built):
    summary, _ = built
    spec = curve_of(summary, "spec")["bins"]
    assert spec[0]["acceptance_rate"] == pytest.approx(0.5) and spec[1]["acceptance_rate"] == pytest.approx(0.5)
    assert spec[3]["acceptance_rate"] == 0.0  # drafting failed from token 600 on
    assert 0.0 < spec[2]["acceptance_rate"] < 0.5  # the bin where it failed
    assert all(b["acceptance_rate"] is None for b in curve_of(summary, "baseline")["bins"])


def test_speedup_by_position_pairs_each_request_with_the_baselines(built):
    summary, rows = built
    (comp,) = summary["positions"]["comparisons"]
    assert (comp["variant"], comp["level"]) == ("spec", 1.0)
    base = {r["seq"]: r for r in rows if r["variant"] == "baseline"}
    spec = {r["seq"]: r for r in rows if r["variant"] == "spec"}
    both = sorted(set(base) & set(spec))
    for k, b in enumerate(comp["bins"]):
        truth = np.mean([bin_speed(spec[s], k) for s in both]) / np.mean([bin_speed(base[s], k) for s in both])
        assert b["pairs"] == len(both)
        assert b["value"] == pytest.approx(truth, rel=1e-4)
        assert b["ci95"][0] <= b["value"] <= b["ci95"][1]
    assert comp["bins"][0]["value"] > 1.5 and comp["bins"][3]["value"] < 1.0  # the gain is gone at the end


def test_requests_shorter_than_a_bin_leave_no_curve(tmp_path):
    rows, steps = [], [window("baseline", 0, 1, 1_800_000_000.0, 10.0)]
    for seq in range(30):
        rows.append({**record("baseline", 0, 1_800_000_000.0 + seq * 0.3, seq, 1.0)})
        rows[-1].update(
            output_tokens=200, chunk_offsets=rows[-1]["chunk_offsets"][:200], chunk_tokens=[1] * 200, chunk_drafted=[]
        )
    write_run(tmp_path, rows, steps)
    summary = build_summary(load_run(tmp_path))
    assert summary.positions is None and summary.variants["baseline"].steps[0].decode_by_position is None


def test_the_report_draws_the_curves_and_prints_the_answer(tmp_path):
    path, _ = positions_run(tmp_path, np.random.default_rng(11))
    finish_run(path)
    html = (path / "report.html").read_text()
    assert "Decode speed over a long answer" in html and "Decode speed by output position at 1" in html
    assert "spec / baseline by output position at 1" in html
    assert (
        "- long answer: baseline at 1 concurrent streams: decode speed at tokens 768-1,024 is"
        in (path / "summary.md").read_text()
    )


def test_unsteady_steps_feed_the_curves_and_untrustworthy_ones_do_not(tmp_path):
    """Later requests of the baseline slow down (its throughput drifts: the step is unsteady); its curve and the
    speed-up by position are still measured. With too few requests for a step, neither variant has a curve."""
    rows, steps, t = [], [], 1_800_000_000.0
    for variant in ("baseline", "spec"):
        steps.append(window(variant, 0, 1, t, WINDOW_S))
        send, seq = t, 0
        while send < t + WINDOW_S:
            rows.append(record(variant, 0, send, seq, 1.0 + (0.15 * seq if variant == "baseline" else 0.0)))
            send = rows[-1]["t_end"] + 0.001
            seq += 1
        t += WINDOW_S + 10.0
    write_run(tmp_path, rows, steps)
    patch_env(tmp_path, "load", min_requests=5)
    summary = build_summary(load_run(tmp_path))
    assert [s.status for s in summary.variants["baseline"].steps] == ["unsteady"]
    assert summary.comparisons[0].steps[0].status == "unsteady"  # no verdict rests on it
    assert summary.positions.steps_used == ["clean", "unsteady", "too-noisy"]
    assert {c.variant for c in summary.positions.curves} == {"baseline", "spec"}
    (comp,) = summary.positions.comparisons
    assert len(comp.bins) == TOKENS // BIN and comp.bins[0].pairs >= 5

    patch_env(tmp_path, "load", min_requests=1000)
    summary = build_summary(load_run(tmp_path))
    assert {s.status for e in summary.variants.values() for s in e.steps} == {"insufficient"}
    assert summary.positions is None
