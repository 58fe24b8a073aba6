"""The one post-run pipeline: every derived file is recomputed from the raw ones, and they agree."""

import json
import subprocess
import sys

import numpy as np

from locust_llm.analysis.documents.regression import RunComparison
from locust_llm.analysis.documents.summary import Verdict, summary_schema
from locust_llm.pipeline import finish_run
from tests.helpers import REPO
from tests.synthetic import synthetic_run


def report_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_report_brings_back_a_deleted_verdict_that_agrees_with_a_fresh_finish(tmp_path):
    synthetic_run(tmp_path, np.random.default_rng(11))
    env = json.loads((tmp_path / "env.json").read_text())
    env["gates"] = {"ttft_p99_ms": 1.0}  # recorded by the run: every step fails it
    (tmp_path / "env.json").write_text(json.dumps(env))
    fresh = finish_run(tmp_path)
    assert fresh.verdict.exit_code == 3
    first = json.loads((tmp_path / "verdict.json").read_text())
    (tmp_path / "verdict.json").unlink()
    done = report_cli(tmp_path)
    assert done.returncode == 3, done.stderr  # the verdict's code, as a headless run exits
    assert json.loads((tmp_path / "verdict.json").read_text()) == first == fresh.verdict.model_dump(mode="json")
    html = (tmp_path / "report.html").read_text()
    assert "Nightly gates: exit code 3 (an SLO or quality gate failed)" in html


def test_report_keeps_the_comparison_with_an_earlier_run(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    synthetic_run(old, np.random.default_rng(1))
    synthetic_run(new, np.random.default_rng(2))
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "compare", str(old), str(new)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    compared = json.loads((new / "compare.json").read_text())
    assert compared["old_dir"] == str(old) and compared["rows"]
    (new / "compare.json").unlink()
    (new / "compare.json").write_text(json.dumps({**compared, "rows": [], "regressions": []}))
    assert report_cli(new).returncode == 0
    assert json.loads((new / "compare.json").read_text())["rows"] == compared["rows"]  # recomputed, not copied
    assert "Against run synthetic" in (new / "report.html").read_text()


def test_a_missing_named_baseline_is_bad_input(tmp_path):
    synthetic_run(tmp_path, np.random.default_rng(3))
    env = json.loads((tmp_path / "env.json").read_text())
    env["gates"] = {"baseline_run": "nope", "library": str(tmp_path / "library")}
    (tmp_path / "env.json").write_text(json.dumps(env))
    outcome = finish_run(tmp_path)
    assert outcome.verdict.exit_code == 2
    assert "baseline run 'nope' not found" in outcome.verdict.reasons["2"][0]


def test_the_published_schema_is_the_summary_model():
    published = json.loads((REPO / "docs" / "summary.schema.json").read_text())
    assert published == summary_schema(), "regenerate it: locust-llm schema > docs/summary.schema.json"
    assert published["properties"]["variants"]["description"]


def undescribed(schema: dict) -> list[str]:
    """``Model.field`` of every property, in the schema itself and each of its ``$defs``, without a description."""
    models = {schema.get("title", "<root>"): schema, **schema.get("$defs", {})}
    return [
        f"{name}.{field}"
        for name, model in models.items()
        for field, spec in model.get("properties", {}).items()
        if not str(spec.get("description", "")).strip()
    ]


def test_every_field_of_the_published_documents_says_what_it_means():
    assert not undescribed(summary_schema()), "give each field an attribute docstring (its unit too)"
    assert not undescribed(Verdict.model_json_schema())
    assert not undescribed(RunComparison.model_json_schema())


def test_baseline_names_are_plain_names_and_nothing_outside_the_library_goes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, np.random.default_rng(5))
    library, victim = tmp_path / "library", tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    for name in (".", "..", "../victim", "/tmp/x", "a/b"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "locust_llm.cli",
                "baseline",
                "save",
                str(run),
                "--name",
                name,
                "--library",
                str(library),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "not a plain name" in done.stderr, (name, done.stderr)
    assert (victim / "keep.txt").read_text() == "precious"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust_llm.cli",
            "baseline",
            "save",
            str(run),
            "--name",
            "good",
            "--library",
            str(library),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and (library / "good" / "steps.json").exists()
