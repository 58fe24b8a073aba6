"""The quality probes ask every task of the scenario's set, greedy and once per seed at the sampling temperature,
one at a time, and write every answer to quality.json (against a fake llama.cpp /completion)."""

import json

from gevent.pywsgi import WSGIServer

from locust_llm.rundir import RunDir
from locust_llm.runtime.plan import load_plan
from locust_llm.runtime.quality import QualityProbes

from .fakes import options

TASKS = [
    {"id": "sum", "prompt": "2 + 2 =", "reference": 4, "match": "number"},
    {"prompt": "Say hi", "reference": "@baseline", "match": "exact", "max_tokens": 3},
]


class FakeLlamaCpp:
    """Answers ``/completion`` with the prompt and sampling settings it received, and keeps every body."""

    def __init__(self):
        self.bodies = []
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ, start_response):
        body = json.loads(environ["wsgi.input"].read())
        self.bodies.append(body)
        answer = {"content": f"{body['prompt']}/{body['temperature']}/{body.get('seed')}", "tokens": [1, 2]}
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]


def plan_with(tmp_path, quality: str, load: str = ""):
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in TASKS) + "\n")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "name: q\nserver: {engine: llamacpp, tiny_model: {preset: test}}\n"
        f"variants: {{baseline: {{}}, spec: {{}}}}\nload: {{seed: 5{load}}}\nquality: {quality}\n"
    )
    return load_plan(options(scenario=str(scenario)))


def test_greedy_and_seeded_answers_per_task_into_quality_json(tmp_path):
    server = FakeLlamaCpp()
    try:
        plan = plan_with(tmp_path, "{tasks: tasks.jsonl, seeds: 2, temperature: 0.7, max_tokens: 9}")
        probes = QualityProbes(plan, RunDir(tmp_path, "run"))
        probes.measure("baseline", server.url, "m")
        probes.measure("spec", server.url, "m")
    finally:
        server.server.stop()
    doc = json.loads((tmp_path / "run" / "quality.json").read_text())
    assert doc["tasks"] == str(tmp_path / "tasks.jsonl") and doc["seeds"] == [5, 6] and doc["temperature"] == 0.7
    assert [i["id"] for i in doc["items"]] == ["sum", "line 2"] and [i["max_tokens"] for i in doc["items"]] == [9, 3]
    greedy, sampled = doc["variants"]["spec"]["greedy"], doc["variants"]["spec"]["sampled"]
    assert [(a["item"], a["text"]) for a in greedy] == [(0, "2 + 2 =/0.0/None"), (1, "Say hi/0.0/None")]
    assert greedy[0]["tokens"] == [1, 2]
    assert [(a["item"], a["seed"], a["text"]) for a in sampled] == [
        (0, 5, "2 + 2 =/0.7/5"),
        (0, 6, "2 + 2 =/0.7/6"),
        (1, 5, "Say hi/0.7/5"),
        (1, 6, "Say hi/0.7/6"),
    ]
    assert all("tokens" not in a for a in sampled)
    # 2 variants x (2 greedy + 4 sampled); natural stopping, each task's own output cap.
    assert len(server.bodies) == 12 and not any(b["ignore_eos"] for b in server.bodies)
    assert [b["n_predict"] for b in server.bodies[:2]] == [9, 3]


def test_at_temperature_zero_no_sampled_answer_is_asked(tmp_path):
    server = FakeLlamaCpp()
    try:
        plan = plan_with(tmp_path, "{tasks: tasks.jsonl, seeds: 3}", load=", temperature: 0")
        QualityProbes(plan, RunDir(tmp_path, "run")).measure("baseline", server.url, "m")
    finally:
        server.server.stop()
    doc = json.loads((tmp_path / "run" / "quality.json").read_text())
    assert doc["seeds"] == [] and doc["variants"]["baseline"]["sampled"] == [] and len(server.bodies) == 2


def test_no_quality_section_asks_nothing(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: q\nserver: {engine: llamacpp, tiny_model: {preset: test}}\nvariants: {baseline: {}}\n")
    probes = QualityProbes(load_plan(options(scenario=str(scenario))), RunDir(tmp_path, "run"))
    probes.measure("baseline", "http://127.0.0.1:9", "m")  # nothing listens there: nothing may be asked
    assert not (tmp_path / "run" / "quality.json").exists()
