"""``locust-llm plot``: many runs' variants on one self-contained page; the figures drawn are each run's own (a
synthetic run with known per-token times), and the Pareto frontier is the points nothing beats on both axes."""

import json
import re

import numpy as np

from locust_llm.cli import main
from locust_llm.pipeline import finish_run
from locust_llm.report.plot import pareto_front, read_summary, series_of
from tests.synthetic import LEVELS, TPOT_S, synthetic_run


def test_the_frontier_is_what_no_other_point_beats_on_both():
    points = [(1.0, 5.0), (2.0, 4.0), (3.0, 1.0), (1.0, 1.0), (2.0, 2.0), (2.0, 4.0)]
    assert pareto_front(points) == [(1.0, 5.0), (2.0, 4.0), (3.0, 1.0)]


def test_two_runs_on_one_page_with_each_levels_known_speed(tmp_path, capsys):
    runs = []
    for name, seed in (("night-1", 1), ("night-2", 2)):
        (tmp_path / name).mkdir()
        synthetic_run(tmp_path / name, np.random.default_rng(seed))
        finish_run(tmp_path / name)
        runs.append(tmp_path / name)
    series = {s.variant: s for s in series_of(read_summary(runs[0]), "night-1")}
    assert set(series) == set(TPOT_S)
    for variant, per_level in TPOT_S.items():
        drawn = {p.level: p for p in series[variant].points}
        assert set(drawn) <= set(LEVELS)
        for level, point in drawn.items():
            # Per-user decode speed: 1 / the per-token time the synthetic run was written with (jitter of 3%).
            assert abs(point.decode_tps * per_level[level] - 1) < 0.03, (variant, level, point)
    out = tmp_path / "plot.html"
    assert main(["plot", *map(str, runs), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("<svg") == 2 and "night-2 / spec-k4" in page
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", page)  # self-contained
    summary = json.loads((runs[1] / "summary.json").read_text())
    assert f"{summary['variants']['baseline']['steps'][0]['output_tps']:.1f}" in page


def test_a_run_without_a_summary_is_named(tmp_path, capsys):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "p.html")]) == 2
    assert "locust-llm report" in capsys.readouterr().err
