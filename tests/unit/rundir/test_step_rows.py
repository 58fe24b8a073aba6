"""``steps.json``'s rows against their model (``rundir.steps.StepRow``): the files the previous release wrote fit
it field for field, the published schema is the model's, the loader reads typed rows, and a row the model does
not describe is refused, naming it."""

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from locust_llm.rundir import UnreadableFile, load_run
from locust_llm.rundir.steps import StepRow, steps_schema
from tests.helpers import REPO
from tests.unit.test_pipeline import undescribed

# Written by 7db6fe5 (the release before the model): a real ladder run (two CPU llama.cpp servers), and the
# scale-out, soak and lost-worker programs of its tests (tests/unit/runtime, tests/e2e/test_cluster.py), trimmed.
PREVIOUS = sorted((REPO / "tests" / "data" / "steps-7db6fe5").glob("*.json"))


def rows_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["steps"]


def test_the_previous_release_wrote_every_kind_of_row():
    names = {p.stem for p in PREVIOUS}
    assert names == {"ladder", "scale-out", "soak", "worker-lost"}
    keys = {key for path in PREVIOUS for row in rows_of(path) for key in row}
    assert {"context", "extended_s", "servers", "server_level", "pair", "window", "workers_lost"} <= keys


@pytest.mark.parametrize("path", PREVIOUS, ids=lambda p: p.stem)
def test_each_row_of_the_previous_release_fits_the_model_field_for_field(path):
    for row in rows_of(path):
        typed = StepRow.model_validate(row)
        again = typed.model_dump(exclude_unset=True)
        # Nothing lost, nothing added, the same types, in the order the runtime writes them (the file's bytes).
        assert json.dumps(again) == json.dumps(row)
        assert math.isfinite(typed.t_end) and typed.t_end >= typed.t_steady >= typed.t_start


def test_a_row_from_before_the_context_axis_and_step_extensions_fits():
    # Runs before those fields existed (and tests/synthetic's runs) carry neither.
    row = {k: v for k, v in rows_of(PREVIOUS[0])[0].items() if k not in ("context", "extended_s")}
    typed = StepRow.model_validate(row)
    assert typed.context is None and typed.extended_s is None and typed.workers_lost is None


def test_a_row_the_model_does_not_describe_is_refused_naming_the_key():
    row = rows_of(PREVIOUS[0])[0]
    with pytest.raises(ValidationError, match="speed_up"):
        StepRow.model_validate({**row, "speed_up": 2.0})
    with pytest.raises(ValidationError, match="t_end"):
        StepRow.model_validate({k: v for k, v in row.items() if k != "t_end"})
    with pytest.raises(ValidationError, match="mode"):
        StepRow.model_validate({**row, "mode": "burst"})


def test_a_step_still_running_has_nan_times_and_fits():
    row = {**rows_of(PREVIOUS[0])[0], "t_steady": math.nan, "t_end": math.nan}
    typed = StepRow.model_validate(row)
    assert math.isnan(typed.t_steady) and math.isnan(typed.t_end)


def test_the_published_schema_is_the_row_model_and_says_what_each_field_means():
    published = json.loads((REPO / "docs" / "steps.schema.json").read_text())
    assert published == steps_schema(), "regenerate it: locust-llm schema steps > docs/steps.schema.json"
    assert not undescribed(published), "give each field an attribute docstring (its unit too)"


def test_the_loader_reads_typed_rows_and_names_a_row_that_does_not_fit(tmp_path):
    rows = rows_of(REPO / "tests" / "data" / "steps-7db6fe5" / "ladder.json")
    (tmp_path / "steps.json").write_text(json.dumps({"steps": rows, "events": []}))
    loaded = load_run(tmp_path).steps
    assert [(s.variant, s.step, s.level, s.t_end) for s in loaded] == [
        (r["variant"], r["step"], r["level"], r["t_end"]) for r in rows
    ]
    bad = [rows[0], {**rows[1], "mode": None}]
    (tmp_path / "steps.json").write_text(json.dumps({"steps": bad, "events": []}))
    with pytest.raises(UnreadableFile, match=r"steps\.json: steps\[1\] is not a step row \(mode: "):
        load_run(tmp_path)


@pytest.mark.parametrize("later", [("extended_s", "workers_lost"), ("workers_lost", "extended_s")])
def test_fields_set_during_the_step_are_written_in_the_order_they_were_set(later):
    # A worker lost during the steady window comes before extended_s, one lost during an extension after it (the
    # runtime's rows were dicts: the file's bytes keep that order).
    made = {"variant": "v", "step": 0, "level": 2, "mode": "closed", "users": 2, "context": None, "t_start": 1.0}
    row = StepRow(**made, t_steady=math.nan, t_end=math.nan)
    row.t_steady = 2.0
    values = {"extended_s": 0.0, "workers_lost": [1]}
    for name in later:
        setattr(row, name, values[name])
    row.t_end = 9.0
    assert list(row.written()) == [*made, "t_steady", "t_end", *later]
    assert row.written() == row.model_dump(exclude_unset=True)
