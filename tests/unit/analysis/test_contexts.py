"""The context-length axis on a synthetic run whose answer is set by construction: the variant's per-token time
and acceptance worsen with prompt length; each length gets its own figures and speed-up, and the ladder's
verdict is computed from the ladder's steps alone."""

import numpy as np
import pytest

from locust_llm.analysis.summary import build_summary
from locust_llm.pipeline import finish_run
from locust_llm.rundir import load_run
from tests.synthetic import back_to_back, patch_env, window, write_run

TOKENS = 40
# (context or None for the ladder) -> variant -> (per-token seconds, drafted, accepted per request)
CASES = {
    None: {"baseline": (0.010, None, None), "spec": (0.005, 16, 12)},
    256: {"baseline": (0.010, None, None), "spec": (0.006, 16, 10)},
    2048: {"baseline": (0.012, None, None), "spec": (0.011, 16, 4)},
}


def context_run(path, rng):
    rows, steps, t = [], [], 1_800_000_000.0
    for step, (context, variants) in enumerate(CASES.items()):
        for variant, (tpot, drafted, accepted) in variants.items():
            steps.append({**window(variant, step, 1, t, 20.0), "context": context})
            rows += back_to_back(
                path.name,
                variant,
                1,
                step,
                t,
                20.0,
                0.02,
                tpot,
                TOKENS,
                rng,
                draft_n=drafted,
                draft_accepted=accepted,
                prompt_tokens=context or 64,
            )
            t += 25.0
    write_run(path, rows, steps)
    return patch_env(path, "load", prompt_tokens=64)  # the ladder's own prompts: the axis's shortest point


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    run = context_run(tmp_path_factory.mktemp("contexts"), np.random.default_rng(2))
    return build_summary(load_run(run)).model_dump(mode="json")


def speedup_truth(base_tpot, spec_tpot):
    return (0.02 + 39 * base_tpot) / (0.02 + 39 * spec_tpot)


def test_each_context_length_gets_its_own_speedup_and_acceptance(summary):
    assert [(c["context_tokens"], c["ladder"]) for c in summary["contexts"]] == [
        (64, True),
        (256, False),
        (2048, False),
    ]
    assert summary["contexts"][0]["comparisons"] == summary["comparisons"]
    for ctx in summary["contexts"][1:]:
        cases = CASES[ctx["context_tokens"]]
        (comp,) = ctx["comparisons"]
        (step,) = comp["steps"]
        assert step["output_tps_speedup"]["value"] == pytest.approx(
            speedup_truth(cases["baseline"][0], cases["spec"][0]), rel=0.03
        )
        (spec,) = ctx["variants"]["spec"]
        _, drafted, accepted = cases["spec"]
        client = spec["acceptance_client"]
        # Every request drafted and accepted the same: the interval over requests has no width.
        assert client["rate"] == pytest.approx(accepted / drafted)
        assert client["rate_ci95"] == pytest.approx([accepted / drafted] * 2)
        # 39 tokens after the first, each target pass yielding its accepted drafts plus one token.
        assert client["mean_length"] == pytest.approx((TOKENS - 1) / (TOKENS - 1 - accepted))
        assert client["mean_length_ci95"] == pytest.approx([(TOKENS - 1) / (TOKENS - 1 - accepted)] * 2)
        assert client["requests"] == spec["requests"] and "timings" in client["source"]
        assert spec["tpot_p50_ms"] == pytest.approx(cases["spec"][0] * 1000, rel=0.03)
        # The baseline drafts nothing and streams one token per chunk: one token per pass, no rate.
        base = ctx["variants"]["baseline"][0]["acceptance_client"]
        assert base["rate"] is None and base["mean_length"] == pytest.approx(1.0) and "chunk" in base["source"]


def test_the_ladders_verdict_ignores_the_context_steps(summary):
    (comp,) = summary["comparisons"]
    (step,) = comp["steps"]
    assert step["output_tps_speedup"]["value"] == pytest.approx(speedup_truth(0.010, 0.005), rel=0.03)
    assert step["output_tps_speedup"]["blocks"] == 1  # the ladder's block only, not pooled with the contexts
    contexts = [s["context"] for s in summary["variants"]["spec"]["steps"]]
    assert contexts == [None, 256, 2048]


def test_the_report_shows_acceptance_per_length_with_its_interval(tmp_path):
    finish_run(context_run(tmp_path, np.random.default_rng(2)))
    html = (tmp_path / "report.html").read_text()
    assert "acceptance: requests (95% CI)" in html and "tokens per pass: requests (95% CI)" in html
    # 10 of 16 drafted tokens accepted at 256 tokens, 4 of 16 at 2048; every request alike, so a zero-width interval.
    assert '62.5% <span class="ci">(62.5–62.5%)</span>' in html
    assert '25.0% <span class="ci">(25.0–25.0%)</span>' in html
    assert f'{39 / 29:.2f} <span class="ci">' in html  # 39 tokens over 39 - 10 passes
