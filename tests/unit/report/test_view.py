"""``RunView`` (``report.view``): the order variants are shown in, and env.json sections a run lacks or wrote as
null read as empty, never as an error (a garbled section is refused when env.json is read: ``rundir.load``)."""

from locust_llm.report.charts import PALETTE
from locust_llm.rundir.env import HostEnv, RecordedServer, WorkloadEnv
from tests.unit.report.documents import step, summary, view


def test_the_baseline_comes_first_then_run_order_with_planned_variants_that_never_ran():
    doc = summary({"k4": [step(1.0)], "base": [step(1.0)]})
    v = view(doc, env={"variants": ["k4", "k8", "base"]})
    assert v.names == ["base", "k4", "k8"]
    assert v.color("base") == PALETTE[0] and v.color("k4") != v.color("k8")
    assert v.color(None) == v.color("not a variant") == "#333"


def test_null_or_missing_env_sections_read_as_empty():
    env = {"host": None, "workload": None, "scenario": {"server": None, "variants": {"base": None}}}
    v = view(summary({"base": [step(1.0)]}), env=env)
    assert (v.host, v.workload, v.options, v.server_spec) == (HostEnv(), WorkloadEnv(), {}, RecordedServer())
    assert v.speculative_of("base") is None
    assert v.model_name() is None and v.engine() is None
    assert "host unknown host (GPU not recorded)" in v.conditions_line()


def test_steps_of_a_variant_are_in_level_order_without_the_context_lengths():
    doc = summary({"base": [step(4.0, 0), step(1.0, 1), step(2.0, 2, context=8192)]})
    assert [s.level for s in view(doc).steps_of("base")] == [1.0, 4.0]
    assert view(doc).steps_of("absent") == []


def test_the_conditions_line_gives_the_steady_windows_as_measured():
    # Planned 10 s; one step was extended to 20 s and one cut at 4.96 s: the line says what the figures rest on.
    doc = summary(
        {
            "base": [step(1.0, 0, window_s=10.02), step(2.0, 1, window_s=20.0)],
            "k4": [step(1.0, 2, window_s=4.96), step(2.0, 3, window_s=10.0)],
        }
    )
    env = {"scenario": {"load": {"step_duration_s": 10, "warmup_s": 2}}}
    v = view(doc, env=env)
    assert "5-20 s steady + 2 s warm-up per level" in v.conditions_line()
    assert "10-20 s steady" in v.conditions_line("base")
    assert "10 s steady" in view(summary({"base": [step(1.0, window_s=9.98)]}), env=env).conditions_line()
    assert "10 s steady" in view(summary({"base": [step(1.0)]}), env=env).conditions_line()  # no window: as planned
