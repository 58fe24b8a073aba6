"""``locust-llm baseline save``: only a saved baseline of that name is ever replaced; saving one onto itself, onto a
symbolic link or onto a folder of something else is a one-line error (exit 2) that removes nothing."""

import numpy as np
import pytest

from locust_llm.cli import main
from tests.synthetic import synthetic_run


@pytest.fixture
def library(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, np.random.default_rng(5))
    library = tmp_path / "library"
    assert main(["baseline", "save", str(run), "--name", "good", "--library", str(library)]) == 0
    return library


def save(capsys, source, name: str, library) -> tuple[int, str]:
    code = main(["baseline", "save", str(source), "--name", name, "--library", str(library)])
    err = capsys.readouterr().err
    return code, err


def one_line_error(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_saving_a_baseline_onto_itself_keeps_it(library, capsys):
    before = sorted(p.name for p in (library / "good").iterdir())
    code, err = save(capsys, library / "good", "good", library)
    assert code == 2 and one_line_error(err) and "itself" in err
    assert sorted(p.name for p in (library / "good").iterdir()) == before


def test_a_symbolic_link_or_a_foreign_folder_in_the_library_is_left_alone(library, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "steps.json").write_text("{}")  # looks like a run: still not removed through the link
    (library / "sym").symlink_to(victim)
    code, err = save(capsys, tmp_path / "run", "sym", library)
    assert code == 2 and one_line_error(err) and "symbolic link" in err
    assert (victim / "steps.json").read_text() == "{}" and (library / "sym").is_symlink()
    (library / "notes").mkdir()
    (library / "notes" / "keep.txt").write_text("mine")
    code, err = save(capsys, tmp_path / "run", "notes", library)
    assert code == 2 and one_line_error(err) and "not a saved baseline" in err
    assert (library / "notes" / "keep.txt").read_text() == "mine"


def test_a_library_inside_the_run_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_run(run, np.random.default_rng(5))
    code, err = save(capsys, run, "good", run / "library")
    assert code == 2 and one_line_error(err) and not (run / "library").exists()


def test_saving_again_replaces_the_baseline_with_the_new_run(library, tmp_path, capsys):
    newer = tmp_path / "newer"
    newer.mkdir()
    synthetic_run(newer, np.random.default_rng(6))
    (newer / "marker.json").write_text("{}")
    code, _ = save(capsys, newer, "good", library)
    assert code == 0 and (library / "good" / "marker.json").exists()
    assert sorted(p.name for p in library.iterdir()) == ["good"]  # nothing left of the copy on its way
