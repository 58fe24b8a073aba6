"""Capacity under the gates: a level meets a gate when its figure's whole 95% interval is within the limit, fails when
the whole interval is beyond it, and is open otherwise; the capacity is the highest level reached through meeting
levels, the speed-up read as capacity is the ratio of two such levels, and the next level to measure bisects."""

from locust_llm.analysis.capacity import capacities, capacity_lines
from locust_llm.analysis.documents.summary import Summary
from locust_llm.scenario import GatesSpec


def step(index: int, level: float, p99_ci: tuple[float, float], status: str = "clean", errors: int = 0) -> dict:
    return {
        "step": index,
        "level": level,
        "mode": "closed",
        "status": status,
        "requests": 200,
        "errors": errors,
        "ttft_all_ms": {"p99": sum(p99_ci) / 2, "n": 200, "ci95": {"p99": list(p99_ci)}},
    }


def summary(variants: dict[str, list[dict]]) -> Summary:
    return Summary.model_validate(
        {
            "generated_at": "now",
            "records": 0,
            "baseline": "baseline",
            "variants": {name: {"steps": steps} for name, steps in variants.items()},
        }
    )


GATES = GatesSpec(ttft_p99_ms=500, error_rate=None)


def test_capacity_is_the_highest_level_whose_interval_is_within_the_limit():
    run = summary(
        {
            # meets at 1 and 2, fails at 8 (whole interval beyond 500 ms)
            "baseline": [step(0, 1, (100, 200)), step(1, 2, (300, 450)), step(2, 8, (520, 900))],
            # meets up to 4; 8 straddles the limit: open
            "spec-k4": [step(0, 1, (80, 150)), step(1, 2, (150, 250)), step(2, 4, (300, 480)), step(3, 8, (450, 560))],
        }
    )
    base, spec = capacities(run, GATES)
    assert (base.level, base.failing, base.open_levels, base.next_level) == (2, 8, [], 5.0)  # bisect 2..8
    assert (spec.level, spec.failing, spec.open_levels, spec.next_level) == (4, None, [8], 8)  # 8 again, longer
    lines = capacity_lines(run, GATES)
    assert "TTFT P99 <= 500 ms" in lines[0]
    assert "  spec-k4 holds 4 users, the baseline 2: 2.00x the capacity (levels measured, not interpolated)" in lines


def test_a_step_that_is_not_clean_or_has_no_interval_leaves_the_level_open_and_errors_count():
    run = summary(
        {
            "baseline": [step(0, 1, (100, 200)), step(1, 2, (100, 200), status="contended"), step(2, 4, (100, 200))],
            "spec-k4": [step(0, 1, (100, 200), errors=100)],  # half the requests failed
        }
    )
    base, spec = capacities(run, GatesSpec(ttft_p99_ms=500, error_rate=0.05))
    assert (base.level, base.open_levels, base.next_level) == (1, [2], 2)  # not beyond a level it cannot judge
    assert (spec.level, spec.failing) == (None, 1)  # Wilson interval of 100/200 lies wholly above 5%
    assert capacities(run, GatesSpec(error_rate=0.05)) == []  # no latency gate: no capacity to speak of
