"""Greedy consistency as one check: the consistency prompts and the quality tasks counted together, each divergence
named, its cause told by the baseline's own repeat."""

from locust_llm.analysis.agreement import agreement
from locust_llm.analysis.documents.quality import Agreement
from locust_llm.analysis.greedy import greedy_check
from locust_llm.rundir.consistency import Answer


def answers(*token_lists):
    return [Answer(text=" ".join(map(str, t)), tokens=list(t)) for t in token_lists]


def compared(ids, baseline, other) -> Agreement:
    return Agreement.model_validate(agreement(ids, baseline, other))


BASE = answers([1, 2, 3, 4], [5, 6, 7], [8, 9])
PROMPTS = compared(["p0", "p1", "p2"], BASE, BASE)
TASKS = ["sum", "person-json", "haiku", "extract"]
TASK_BASE = answers([1, 1], [2, 3, 4, 5, 6, 7, 8, 9], [4], [5, 5, 5])
# The variant differs on one quality task from its 7th token (index 6), like the default run's spec-k4.
TASK_DIVERGED = compared(TASKS, TASK_BASE, answers([1, 1], [2, 3, 4, 5, 6, 7, 0, 9], [4], [5, 5, 5]))
REPEATED = compared(["p0", "p1", "p2"], BASE, BASE)
NOT_REPEATED = compared(["p0", "p1", "p2"], BASE, answers([1, 2, 3, 4], [5, 6, 0], [8, 9]))


def test_both_sources_count_in_one_figure_and_a_divergence_is_named_where_it_begins():
    check = greedy_check(PROMPTS, TASK_DIVERGED, REPEATED)
    assert (check.compared, check.identical) == (7, 6)
    (where,) = check.diverged
    assert (where.source, where.prompt_id, where.unit, where.first_divergence, where.length) == (
        "quality task",
        "person-json",
        "token",
        6,
        8,
    )
    assert check.baseline_repeat == "identical" and check.cause == "speculative decoding"
    assert check.text.startswith(
        "6/7 greedy answers identical to the baseline's, DIVERGED on quality task person-json "
        "from token 6 of 8; the baseline repeated itself on 3/3: speculative decoding changed"
    )


def test_a_baseline_that_does_not_repeat_itself_takes_the_blame_off_speculation():
    check = greedy_check(PROMPTS, TASK_DIVERGED, NOT_REPEATED)
    assert check.baseline_repeat == "diverged" and check.cause == "engine nondeterminism"
    assert "1 of 3 prompts differ when asked again" in check.text and "cannot be blamed" in check.text


def test_without_a_repeat_the_cause_is_unknown_and_without_a_divergence_there_is_none():
    assert greedy_check(PROMPTS, TASK_DIVERGED, None).cause == "unknown"
    clean = greedy_check(PROMPTS, None, REPEATED)
    assert (clean.compared, clean.identical, clean.diverged, clean.cause) == (3, 3, [], None)
    assert clean.text == "3/3 greedy answers identical to the baseline's; the baseline repeated itself on 3/3"
    assert greedy_check(None, None, None).text == "no greedy answer compared"
