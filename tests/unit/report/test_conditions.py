"""The conditions line under every figure names the server that was measured: one attached with ``--host`` is an
external server, whatever engine the scenario would have launched."""

import json

import pytest

from locust_llm.pipeline import finish_run
from tests.synthetic import stream_record, window, write_run

START = 1_700_000_000.0


@pytest.mark.parametrize(
    "servers, external_url, expected, absent",
    [
        (
            {"baseline": {"url": "http://127.0.0.1:8000", "served_model": "m", "launched": False}},
            "http://127.0.0.1:8000",
            "external server",
            "llamacpp",
        ),
        (
            {"baseline": {"engine": "llamacpp", "version": "version: 7000 (abc)", "launched": True}},
            None,
            "llamacpp 7000",
            "external server",
        ),
    ],
    ids=["attached-with-host", "launched"],
)
def test_the_conditions_line_names_the_server_that_was_measured(tmp_path, servers, external_url, expected, absent):
    rows = [
        stream_record("c", "baseline", 1, 0, START + i * 0.5, 0.05, 0.01, 10, request_id=f"r{i}") for i in range(20)
    ]
    run = write_run(tmp_path, rows, [window("baseline", 0, 1, START, 10)])
    env = json.loads((run / "env.json").read_text())
    env["scenario"]["server"] = {"engine": "llamacpp", "model": "tiny.gguf"}  # what the scenario would launch
    env.update(servers=servers, external_url=external_url)
    (run / "env.json").write_text(json.dumps(env))
    finish_run(run)
    html = (run / "report.html").read_text()
    lines = [line for line in html.splitlines() if "loop, completions" in line]  # the conditions lines
    assert lines and all(expected in line and absent not in line for line in lines)
