"""``telemetry.json`` against its model (``rundir.telemetry_meta``): the previous release's file fits it field for
field, a gap is written in the order the poller's dicts had, an absent or hand-made file loads, one that does not
fit is refused naming the field, and the published schema is the model's."""

import json

import pytest
from pydantic import ValidationError

from locust_llm.rundir import UnreadableFile, load_run
from locust_llm.rundir.load import read_typed
from locust_llm.rundir.telemetry_meta import TelemetryGap, TelemetryMeta, TelemetryNote, telemetry_schema
from tests.helpers import REPO
from tests.unit.test_pipeline import undescribed

# Written by the previous release's poller (the golden trace run of issue 28: a llama.cpp server, scraped, its
# process read, no GPU).
PREVIOUS = REPO / "tests" / "data" / "telemetry-previous.json"


def test_the_previous_release_file_fits_field_for_field():
    raw = json.loads(PREVIOUS.read_text())
    typed = read_typed(PREVIOUS, TelemetryMeta)
    assert json.dumps(typed.written()) == json.dumps(raw)  # nothing lost, nothing added, in the file's order
    # Interleaved: the variants' servers attached in turn, one at a time.
    assert [a.variant for a in typed.attachments] == ["baseline", "spec-k4"] * 3 + ["baseline"]
    attachment = typed.attachments[0]
    assert (attachment.engine, attachment.prometheus_url, attachment.t_detach is not None) == ("llamacpp", None, True)
    assert [(s.source, s.url is not None, s.pid is not None) for s in attachment.sources] == [
        ("scrape", True, False),
        ("process", False, True),
    ]
    assert typed.notes[0].kind == "no_gpu" and typed.gpu == "nvidia-ml-py is not installed"


def test_a_gap_is_written_as_the_poller_wrote_it_before():
    # As the poller makes it at the first failure, then counts failures, keeps the last error and closes it.
    gap = TelemetryGap(
        variant="v",
        source="scrape",
        start=10.0,
        first_failure=10.5,
        end=None,
        failures=0,
        error="unreachable",
        recovered=None,
    )
    open_gap = {
        "variant": "v",
        "source": "scrape",
        "start": 10.0,
        "first_failure": 10.5,
        "end": None,
        "failures": 0,
        "error": "unreachable",
        "recovered": None,
    }
    assert json.dumps(TelemetryMeta(gaps=[gap]).written()["gaps"]) == json.dumps([open_gap])
    gap.failures += 1
    gap.last_error = "no answer"
    gap.end, gap.recovered = 12.0, True
    # The dicts of before: a key set again stays in place, the one set later (last_error) comes last.
    closed = {**open_gap, "end": 12.0, "failures": 1, "recovered": True, "last_error": "no answer"}
    assert json.dumps(TelemetryMeta(gaps=[gap]).written()["gaps"]) == json.dumps([closed])


def test_an_absent_or_hand_made_file_loads(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    assert load_run(tmp_path).telemetry_meta == TelemetryMeta()
    (tmp_path / "telemetry.json").write_text(json.dumps({"gaps": [], "notes": [{"kind": "x", "t": 0, "message": "m"}]}))
    meta = load_run(tmp_path).telemetry_meta
    assert meta.notes == [TelemetryNote(kind="x", t=0.0, message="m")] and meta.interval_s is None


def test_a_field_the_model_does_not_describe_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="eror"):
        TelemetryGap(variant="v", source="scrape", start=1.0, eror="x")  # type: ignore[call-arg]
    raw = json.loads(PREVIOUS.read_text())
    raw["attachments"][0]["sources"][0]["pols"] = raw["attachments"][0]["sources"][0].pop("polls")
    (tmp_path / "telemetry.json").write_text(json.dumps(raw))
    with pytest.raises(UnreadableFile, match=r"telemetry.json: .*attachments.0.sources.0.polls: Field required"):
        read_typed(tmp_path / "telemetry.json", TelemetryMeta)


def test_the_published_schema_is_the_model_and_says_what_each_field_means():
    published = json.loads((REPO / "docs" / "telemetry.schema.json").read_text())
    assert published == telemetry_schema(), "regenerate it: locust-llm schema telemetry > docs/telemetry.schema.json"
    assert not undescribed(published), "give each field an attribute docstring (its unit too)"
