"""``consistency.json``, ``quality.json`` and ``probes.json`` against their models (``rundir.consistency``,
``rundir.quality``, ``rundir.probes``): the files the previous release wrote fit them field for field, the loader
reads them typed, a field the models do not describe is refused when a record is made (a typo fails the run that
writes it, not the analysis a week later) and named when a file is read, and the published schemas are the
models'."""

import json
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from locust_llm.cli import main
from locust_llm.rundir import UnreadableFile, load_run
from locust_llm.rundir.consistency import Answer, Consistency, ConsistencyAnswer, consistency_schema
from locust_llm.rundir.probes import VERDICTS, ProbeResult, ProbesFile, probes_schema
from locust_llm.rundir.quality import QualityAnswer, QualityFile, quality_schema
from tests.helpers import REPO
from tests.unit.test_pipeline import undescribed

# Written by a4e42c8 (the release before the models): a real two-server llama.cpp run (its consistency and quality
# files cut to their first prompts and tasks, answers kept whole), a short run against the reference server with
# --probes and a quality section (it only streams: every greedy answer failed), the reference servers of
# tests/unit/runtime/test_faults.py paused, restarted, failing to restart and crashing on a probe, and a llama.cpp
# run whose consistency check failed.
PREVIOUS = REPO / "tests" / "data" / "run-files-a4e42c8"
STEPS = REPO / "tests" / "data" / "steps-7db6fe5" / "ladder.json"
MODELS: dict[str, type[BaseModel]] = {"consistency": Consistency, "quality": QualityFile, "probes": ProbesFile}
SCHEMAS = {"consistency": consistency_schema, "quality": quality_schema, "probes": probes_schema}


def files(kind: str) -> list[Path]:
    return sorted(PREVIOUS.glob(f"{kind}-*.json"))


def as_written(kind: str, typed: BaseModel) -> object:
    """What the runtime writes from a record: the fields it was made with (probes: every field)."""
    return typed.model_dump(mode="json") if kind == "probes" else typed.model_dump(exclude_unset=True)


def test_the_previous_release_wrote_every_kind_of_record():
    rows = [row for path in files("probes") for row in json.loads(path.read_text())["probes"]]
    assert {row["verdict"] for row in rows} == set(VERDICTS) and {row["kind"] for row in rows} == {"probe", "fault"}
    answers = [
        answer
        for path in files("quality")
        for variant in json.loads(path.read_text())["variants"].values()
        for kind in ("greedy", "sampled")
        for answer in variant[kind]
    ]
    assert {tuple(sorted(a)) for a in answers} == {
        ("item", "text", "tokens"),  # greedy, answered
        ("error", "item", "text", "tokens"),  # greedy, failed
        ("item", "seed", "text"),  # sampled, answered (no token ids)
        ("error", "item", "seed", "text"),  # sampled, failed
    }
    outputs = [a for path in files("consistency") for v in json.loads(path.read_text()).values() for a in v]
    assert {a["text"] is None for a in outputs} == {True, False}
    assert any(a["tokens"] for a in outputs) and any("error" in a for a in outputs)


@pytest.mark.parametrize("kind", list(MODELS))
def test_each_file_of_the_previous_release_fits_its_model_field_for_field(kind):
    assert files(kind)
    for path in files(kind):
        raw = json.loads(path.read_text())
        typed = MODELS[kind].model_validate(raw)
        # Nothing lost, nothing added, the same types, in the order the runtime writes them (the file's bytes).
        assert json.dumps(as_written(kind, typed)) == json.dumps(raw), path.name


def run_dir_with(tmp_path: Path, consistency: str, quality: str, probes: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "steps.json").write_text(json.dumps({"steps": json.loads(STEPS.read_text())["steps"], "events": []}))
    shutil.copy(PREVIOUS / consistency, run / "consistency.json")
    shutil.copy(PREVIOUS / quality, run / "quality.json")
    shutil.copy(PREVIOUS / probes, run / "probes.json")
    return run


def test_the_loader_reads_the_files_of_the_previous_release_typed(tmp_path):
    run = run_dir_with(tmp_path, "consistency-llamacpp.json", "quality-llamacpp.json", "probes-crash.json")
    loaded = load_run(run)
    consistency = json.loads((run / "consistency.json").read_text())
    assert {
        name: [(a.prompt_id, a.text, a.tokens) for a in answers] for name, answers in loaded.consistency.items()
    } == {name: [(a["prompt_id"], a["text"], a["tokens"]) for a in answers] for name, answers in consistency.items()}
    quality = json.loads((run / "quality.json").read_text())
    assert loaded.quality is not None
    assert [(t.id, t.reference, t.match, t.max_tokens) for t in loaded.quality.items] == [
        (t["id"], t["reference"], t["match"], t["max_tokens"]) for t in quality["items"]
    ]
    sampled = loaded.quality.variants["spec-k4"].sampled
    assert [(a.item, a.seed, a.text, a.tokens) for a in sampled] == [
        (a["item"], a["seed"], a["text"], None) for a in quality["variants"]["spec-k4"]["sampled"]
    ]
    rows = json.loads((run / "probes.json").read_text())["probes"]
    assert [(p.probe, p.verdict, p.status) for p in loaded.probes] == [
        (r["probe"], r["verdict"], r["status"]) for r in rows
    ]


def test_a_run_without_the_checks_loads_with_none_of_them(tmp_path):
    run = run_dir_with(tmp_path, "consistency-cache.json", "quality-refserver.json", "probes-pause.json")
    for name in ("consistency.json", "quality.json", "probes.json"):
        (run / name).unlink()
    loaded = load_run(run)
    assert loaded.consistency == {} and loaded.quality is None and loaded.probes == []


@pytest.mark.parametrize(
    "name, damage, where",
    [
        ("probes.json", lambda d: d["probes"][0].update(verdcit="ok"), r"probes\.0\.verdcit: Extra inputs"),
        ("probes.json", lambda d: d["probes"][0].update(verdict="fine"), r"probes\.0\.verdict: Input should be"),
        ("quality.json", lambda d: d["items"][1].pop("match"), r"items\.1\.match: Field required"),
        ("consistency.json", lambda d: d["ref"][2].update(tokens=["a"]), r"ref\.2\.tokens\.0: Input should be"),
    ],
)
def test_a_file_that_does_not_fit_names_the_file_and_the_field(tmp_path, name, damage, where):
    run = run_dir_with(tmp_path, "consistency-cache.json", "quality-refserver.json", "probes-pause.json")
    doc = json.loads((run / name).read_text())
    damage(doc)
    (run / name).write_text(json.dumps(doc))
    with pytest.raises(UnreadableFile, match=rf"{run / name}: not a {name} file \(.*{where}"):
        load_run(run)


def test_a_typo_in_a_field_is_refused_when_the_record_is_made():
    row = json.loads((PREVIOUS / "probes-pause.json").read_text())["probes"][0]
    with pytest.raises(ValidationError, match="recoverd"):
        ProbeResult(**{**row, "recoverd": True})
    with pytest.raises(ValidationError, match="promt_id"):
        ConsistencyAnswer(promt_id="a/0", max_tokens=8, text="x")
    with pytest.raises(ValidationError, match="seeed"):
        QualityAnswer(item=0, seeed=1, text="x")
    doc = json.loads((PREVIOUS / "quality-refserver.json").read_text())
    with pytest.raises(ValidationError, match="max_drop"):
        QualityFile.model_validate({**doc, "max_drop": 5.0})
    with pytest.raises(ValidationError, match="tokens"):  # token ids are integers
        Answer(text="x", tokens=["x"])


def test_answers_become_records_as_the_runtime_wrote_them():
    # A greedy answer keeps its token ids, a sampled one drops them; a failure keeps its nulls and its error.
    answered, failed = Answer(text="hi", tokens=[1, 2]), Answer(text=None, tokens=None, error="HTTP 500: boom")
    assert QualityAnswer.of(3, answered).model_dump(exclude_unset=True) == {"item": 3, "text": "hi", "tokens": [1, 2]}
    assert list(QualityAnswer.of(3, answered, seed=7).model_dump(exclude_unset=True)) == ["item", "seed", "text"]
    assert ConsistencyAnswer.of("b/0", 8, failed).model_dump(exclude_unset=True) == {
        "prompt_id": "b/0",
        "max_tokens": 8,
        "text": None,
        "tokens": None,
        "error": "HTTP 500: boom",
    }


@pytest.mark.parametrize("kind", list(SCHEMAS))
def test_the_published_schemas_are_the_models_and_say_what_each_field_means(kind, capsys):
    published = json.loads((REPO / "docs" / f"{kind}.schema.json").read_text())
    assert published == SCHEMAS[kind](), f"regenerate it: locust-llm schema {kind} > docs/{kind}.schema.json"
    assert not undescribed(published), "give each field an attribute docstring (its unit too)"
    assert main(["schema", kind]) == 0
    assert json.loads(capsys.readouterr().out) == published
