"""Workload: exact prompt lengths, buckets, datasets, seeded per-worker sequences, /tokenize clients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from locust_llm.client.tokenizer import ServerTokenizer, counter_for
from locust_llm.scenario import Bucket, LoadSpec
from locust_llm.workload import (
    ApproxCounter,
    LocalTokenizer,
    PromptItem,
    Workload,
    WorkloadError,
    read_dataset,
)
from tests.helpers import REPO


class FakeCounter:
    """Deterministic stand-in tokenizer: each space-separated piece is a token, words of 7+ letters are
    two and words with a 'z' three; an empty piece (a leading, trailing or doubled space) is a token of
    its own, as in SentencePiece. Counts its calls, so tests can prove item() never tokenizes."""

    def __init__(self):
        self.calls = 0

    @staticmethod
    def word(w: str) -> int:
        return 3 if "z" in w else 2 if len(w) >= 7 else 1

    def count(self, text: str) -> int:
        self.calls += 1
        return sum(self.word(w) for w in text.split(" ")) if text else 0


class StartCostsMore(FakeCounter):
    """A text's first word costs one token more than the same word after a space (like GPT-2 BPE's
    'hello' vs ' hello'): exercises the correction loop, which works from real counts."""

    def count(self, text: str) -> int:
        return super().count(text) + (1 if text and not text.startswith(" ") else 0)


class MergingCounter(FakeCounter):
    """Two adjacent words of the same length merge into one token less: the count is not additive
    across the unique-prefix boundary, which the set-up check must notice."""

    def count(self, text: str) -> int:
        self.calls += 1
        words = text.split(" ")
        total = sum(self.word(w) for w in words)
        return total - sum(1 for a, b in zip(words, words[1:], strict=False) if a and b and len(a) == len(b))


def spec(**kw) -> LoadSpec:
    return LoadSpec(**kw)


BUCKETS = {
    "short": Bucket(prompt_tokens=16, max_tokens=32, weight=1.0),
    "medium": Bucket(prompt_tokens=200, max_tokens=64, weight=2.0),
    "long": Bucket(prompt_tokens=1500, max_tokens=16, weight=1.0),
}


@pytest.fixture(scope="module")
def bucketed() -> tuple[Workload, FakeCounter]:
    counter = FakeCounter()
    return Workload.from_spec(spec(buckets=BUCKETS, seed=7, unique_prefix=False), counter, Path(".")), counter


# ----------------------------------------------------------------------------- generated prompts


def test_every_pool_prompt_has_the_exact_length(bucketed):
    workload, _ = bucketed
    check = FakeCounter()
    assert list(workload.pools) == ["short", "medium", "long"]
    for name, items in workload.pools.items():
        assert len(items) == 64 and len({it.prompt for it in items}) == 64  # distinct pool
        for it in items:
            assert it.exact and it.bucket == name
            assert it.prompt_tokens == BUCKETS[name].prompt_tokens == check.count(it.prompt)
            assert it.max_tokens == BUCKETS[name].max_tokens
            assert it.prompt.isascii() and it.prompt.isprintable() and it.prompt == it.prompt.strip()
    assert workload.exact


def test_correction_loop_handles_context_dependent_costs():
    counter = StartCostsMore()
    workload = Workload.from_spec(
        spec(prompt_tokens=50, max_tokens=8, unique_prefix=False), counter, Path("."), pool_size=16
    )
    assert list(workload.pools) == ["default"]
    for it in workload.pools["default"]:
        assert StartCostsMore().count(it.prompt) == 50 == it.prompt_tokens


def test_one_token_prompt_and_impossible_length():
    workload = Workload.from_spec(spec(prompt_tokens=1, unique_prefix=False), FakeCounter(), Path("."), pool_size=4)
    assert all(FakeCounter().count(it.prompt) == 1 for it in workload)

    class AllLong(FakeCounter):
        def count(self, text):
            return 2 * super().count(text)

    with pytest.raises(WorkloadError, match="exactly 3 tokens"):
        Workload.from_spec(spec(prompt_tokens=3, unique_prefix=False), AllLong(), Path("."), pool_size=2)


def test_item_is_deterministic_and_never_tokenizes(bucketed):
    workload, counter = bucketed
    calls = counter.calls
    first = [workload.item(0, 0, k) for k in range(200)]
    assert counter.calls == calls
    # A second workload built from the same spec (another process, another variant) agrees.
    again = Workload.from_spec(spec(buckets=BUCKETS, seed=7, unique_prefix=False), FakeCounter(), Path("."))
    assert [again.item(0, 0, k) for k in range(200)] == first
    # item(w, s, k) does not depend on the step: every ladder step restarts the same sequence.
    assert [workload.item(0, 3, k) for k in range(200)] == first


def test_workers_and_seeds_get_different_sequences(bucketed):
    workload, _ = bucketed
    seqs = {w: [workload.item(w, 0, k).prompt for k in range(50)] for w in range(4)}
    assert len({tuple(s) for s in seqs.values()}) == 4
    for a in range(4):
        for b in range(a + 1, 4):  # not a shifted copy either: most positions differ
            assert sum(x != y for x, y in zip(seqs[a], seqs[b], strict=False)) > 25
    other = Workload.from_spec(
        spec(buckets=BUCKETS, seed=8, unique_prefix=False), FakeCounter(), Path("."), pool_size=8
    )
    assert [other.item(0, 0, k).prompt for k in range(50)] != seqs[0]


def test_sequences_do_not_depend_on_the_process(tmp_path):
    """Pools and choices come from explicit seeds, not hash() or module RNG state."""
    script = (
        "import json; from pathlib import Path;"
        "from tests.unit.workload.test_workload import FakeCounter, BUCKETS; from locust_llm.scenario import LoadSpec;"
        "from locust_llm.workload import Workload;"
        "w = Workload.from_spec(LoadSpec(buckets=BUCKETS, seed=7, unique_prefix=True), FakeCounter(),"
        " Path('.'), pool_size=8);"
        "print(json.dumps([w.item(2, 1, k).prompt for k in range(20)]))"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(json.loads(out.stdout))
    assert outputs[0] == outputs[1]
    here = Workload.from_spec(spec(buckets=BUCKETS, seed=7, unique_prefix=True), FakeCounter(), Path("."), pool_size=8)
    assert outputs[0] == [here.item(2, 1, k).prompt for k in range(20)]


def test_bucket_weights_are_respected(bucketed):
    workload, _ = bucketed
    n = 20000
    shares = Counter(workload.item(k % 8, 0, k // 8).bucket for k in range(n))
    # Expected 1/4, 1/2, 1/4. The draws are a fixed function of the seed, so this cannot flake;
    # the tolerance is still ten standard deviations (sd = sqrt(p(1-p)/n) <= 0.0036).
    for name, expected in (("short", 0.25), ("medium", 0.5), ("long", 0.25)):
        assert abs(shares[name] / n - expected) < 0.036, shares
    # Within a bucket, the pool is used broadly.
    assert len({workload.item(0, 0, k).prompt_id for k in range(2000)}) > 150


def test_unique_prefix_keeps_lengths_exact_and_never_repeats():
    counter = FakeCounter()
    buckets = {"short": Bucket(prompt_tokens=24, max_tokens=4), "long": Bucket(prompt_tokens=300, max_tokens=4)}
    workload = Workload.from_spec(spec(buckets=buckets, unique_prefix=True, seed=1), counter, Path("."), pool_size=16)
    k_words = workload.prefixer.length
    assert workload.prefix_tokens == k_words * workload.prefixer.word_tokens > 0
    assert workload.prefix_exact and workload.exact
    check = FakeCounter()
    prefixes = set()
    for w in range(3):
        for s in range(3):
            for k in range(60):
                it = workload.item(w, s, k)
                assert it.exact and it.prompt_tokens == buckets[it.bucket].prompt_tokens == check.count(it.prompt)
                prefixes.add(" ".join(it.prompt.split(" ")[:k_words]))
    assert len(prefixes) == 3 * 3 * 60  # unique per (worker, step, index): no prefix-cache reuse
    # Same worker/step/index -> same prefix; the body is the step-independent pool prompt.
    a, b = workload.item(1, 0, 5), workload.item(1, 2, 5)
    assert a == workload.item(1, 0, 5) and a.prompt != b.prompt
    assert a.prompt.split(" ")[k_words:] == b.prompt.split(" ")[k_words:]
    # Consecutive requests differ from the first word on (the id is scrambled, low digit first).
    firsts = {workload.item(0, 0, k).prompt.split(" ")[0] for k in range(50)}
    assert len(firsts) > 20


def test_runs_with_different_nonces_share_no_marker_and_keep_lengths_and_bodies():
    # A second run once sent the first run's exact prompts, so a prefix cache served it warm (TTFT 43 vs 169 ms).
    buckets = {"short": Bucket(prompt_tokens=24, max_tokens=4)}
    runs = [
        Workload.from_spec(spec(buckets=buckets, seed=1), FakeCounter(), Path("."), pool_size=8, nonce=nonce)
        for nonce in (0, 0, 0x5A5A5A5A5A5A5, 0x123456789)
    ]
    k_words = runs[0].prefixer.length
    check = FakeCounter()
    sent = [[r.item(w, s, k) for w in range(2) for s in range(2) for k in range(100)] for r in runs]
    markers = [{" ".join(it.prompt.split(" ")[:k_words]) for it in items} for items in sent]
    assert sent[0] == sent[1]  # the same nonce (0: same_prompts_every_run) sends the same bytes
    assert len(markers[2]) == len(markers[3]) == 400  # unique within each run, whatever the nonce
    assert not markers[0] & markers[2] and not markers[2] & markers[3]  # and nothing another run sent
    for a, b in zip(sent[0], sent[2], strict=True):
        assert a.prompt_tokens == b.prompt_tokens == check.count(b.prompt) and a.exact and b.exact
        assert a.prompt.split(" ")[k_words:] == b.prompt.split(" ")[k_words:]  # the body is the dataset's text


def test_unique_prefix_works_with_a_start_sensitive_tokenizer():
    workload = Workload.from_spec(spec(prompt_tokens=40, unique_prefix=True), StartCostsMore(), Path("."), pool_size=8)
    for k in range(30):
        it = workload.item(k % 3, 0, k)
        assert StartCostsMore().count(it.prompt) == it.prompt_tokens == 40


def test_unique_prefix_that_does_not_fit_the_bucket():
    buckets = {"tiny": Bucket(prompt_tokens=3, max_tokens=4)}
    with pytest.raises(WorkloadError, match=r"bucket 'tiny': prompt_tokens 3 .* unique prefix"):
        Workload.from_spec(spec(buckets=buckets, unique_prefix=True), FakeCounter(), Path("."), pool_size=2)


def test_unique_prefix_range_is_checked(bucketed):
    workload = Workload.from_spec(spec(prompt_tokens=30, unique_prefix=True), FakeCounter(), Path("."), pool_size=2)
    with pytest.raises(WorkloadError, match="worker"):
        workload.item(1 << 16, 0, 0)
    with pytest.raises(WorkloadError, match="index"):
        workload.item(0, 0, -1)


def test_non_additive_tokenizer_is_reported_not_hidden():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        workload = Workload.from_spec(
            spec(prompt_tokens=60, unique_prefix=True, seed=2), MergingCounter(), Path("."), pool_size=32
        )
    # Pool bodies are fitted with real counts, after the reference prefix ...
    ref = workload.prefixer.text(0, 0, 0)
    counter = MergingCounter()
    assert all(counter.count(f"{ref} {it.prompt}") - counter.count(ref) == it.prompt_tokens for it in workload)
    # ... but another prefix can merge with a body's first word: the set-up check notices and the
    # items stop claiming exactness rather than carrying a wrong count.
    mismatches = sum(counter.count(workload.item(0, 0, k).prompt) != 60 for k in range(300))
    assert mismatches > 0
    assert not workload.prefix_exact and not workload.exact and not workload.item(0, 0, 0).exact
    assert any("unique_prefix" in str(w.message) for w in caught)


def test_without_a_counter_lengths_are_estimates():
    workload = Workload.from_spec(spec(buckets=BUCKETS, unique_prefix=True), None, Path("."), pool_size=8)
    assert not workload.exact
    for k in range(30):
        it = workload.item(0, 0, k)
        assert not it.exact
        assert it.prompt_tokens == BUCKETS[it.bucket].prompt_tokens == ApproxCounter().count(it.prompt)
    assert workload.describe()["exact"] is False


def test_consistency_prompts():
    workload = Workload.from_spec(spec(buckets=BUCKETS, unique_prefix=True), FakeCounter(), Path("."), pool_size=4)
    prompts = workload.consistency_prompts(7, max_tokens=20)
    assert len(prompts) == 7 and prompts == workload.consistency_prompts(7, max_tokens=20)
    assert [p.bucket for p in prompts[:3]] == ["short", "medium", "long"]
    assert len({p.prompt for p in prompts}) == 7
    assert all(p.max_tokens == min(20, BUCKETS[p.bucket].max_tokens) for p in prompts)
    assert all(FakeCounter().count(p.prompt) == p.prompt_tokens for p in prompts)  # no prefix on them


def test_every_process_builds_the_same_workload(bucketed):
    """Each load process builds its own workload; the same spec and tokenizer give the same prompts."""
    for load in (spec(buckets=BUCKETS, unique_prefix=False), spec(prompt_tokens=40, unique_prefix=True)):
        first, second = (Workload.from_spec(load, FakeCounter(), Path("."), pool_size=4) for _ in range(2))
        assert [first.item(w, 1, k) for w in range(3) for k in range(40)] == [
            second.item(w, 1, k) for w in range(3) for k in range(40)
        ]
        assert first.describe() == second.describe()


def test_describe(bucketed):
    info = bucketed[0].describe()
    assert info["exact"] is True and info["source"] == "generated" and info["seed"] == 7
    assert info["buckets"]["medium"] == {"share": 0.5, "pool": 64, "prompt_tokens": 200, "max_tokens": 64}


def test_the_tokenizer_setting_chooses_the_counter(tmp_path):
    assert counter_for("http://127.0.0.1:9", "none") is None
    assert counter_for(None, "server") is None  # no server to ask: lengths are estimated (exact=False)
    with pytest.raises(WorkloadError, match="tokenizers"):
        LocalTokenizer(tmp_path / "missing-tokenizer.json")


# ----------------------------------------------------------------------------- datasets


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_jsonl_dataset(tmp_path):
    write(
        tmp_path / "prompts.jsonl",
        "\n".join(
            [
                json.dumps({"prompt": "hello there friend", "max_tokens": 12, "bucket": "chat"}),
                "",
                json.dumps({"prompt": "write a poem about the sea", "output_tokens": 40, "extra": "ignored"}),
                json.dumps({"prompt": "summarize this"}),
            ]
        )
        + "\n",
    )
    counter = FakeCounter()
    # A relative dataset path is resolved against base_dir (the scenario's folder).
    workload = Workload.from_spec(spec(dataset="prompts.jsonl", max_tokens=99, unique_prefix=False), counter, tmp_path)
    items = workload.pools["dataset"]
    assert [(it.bucket, it.prompt, it.prompt_tokens, it.max_tokens, it.exact) for it in items] == [
        ("chat", "hello there friend", 3, 12, True),
        ("dataset", "write a poem about the sea", 6, 40, True),
        ("dataset", "summarize this", 4, 99, True),  # "summarize" has a "z": three tokens
    ]
    assert items[1].prompt_id.endswith("prompts.jsonl:3")
    seq = [workload.item(1, 0, k).prompt for k in range(30)]
    assert seq == [workload.item(1, 5, k).prompt for k in range(30)] and len(set(seq)) == 3
    assert workload.describe()["source"] == str(tmp_path / "prompts.jsonl")


def test_dataset_with_unique_prefix_stays_exact(tmp_path):
    rows = [{"prompt": f"question number {i} about the weather in zurich"} for i in range(5)]
    write(tmp_path / "d.jsonl", "\n".join(map(json.dumps, rows)))
    workload = Workload.from_spec(
        spec(dataset=str(tmp_path / "d.jsonl"), unique_prefix=True), FakeCounter(), Path("/nonexistent")
    )
    for k in range(20):
        it = workload.item(0, 0, k)
        assert it.exact and FakeCounter().count(it.prompt) == it.prompt_tokens


def test_dataset_sample_is_seeded(tmp_path):
    write(tmp_path / "d.jsonl", "\n".join(json.dumps({"prompt": f"p {i}"}) for i in range(50)))
    a = Workload.from_spec(spec(dataset="d.jsonl", seed=1), FakeCounter(), tmp_path, max_dataset_items=10)
    b = Workload.from_spec(spec(dataset="d.jsonl", seed=1), FakeCounter(), tmp_path, max_dataset_items=10)
    c = Workload.from_spec(spec(dataset="d.jsonl", seed=2), FakeCounter(), tmp_path, max_dataset_items=10)
    assert len(a.pools["dataset"]) == 10 and list(a) == list(b) and list(a) != list(c)


@pytest.mark.parametrize(
    "lines, line, message",
    [
        (['{"prompt": "ok"}', '{"prompt": "ok"', '{"prompt": "x"}'], "2:16", "not valid JSON: Expecting ',' delimiter"),
        (['{"prompt": "ok"}', "", '["a list"]'], 3, "expected a JSON object with a 'prompt' string, found list"),
        (['{"text": "no prompt key"}'], 1, "missing key 'prompt'.*keys found: text"),
        (['{"prompt": ""}'], 1, "'prompt' must be a non-empty string"),
        (
            ['{"prompt": "a"}', '{"prompt": "b", "max_tokens": 0}'],
            2,
            "'max_tokens' must be a positive integer, found 0",
        ),
        (['{"prompt": "b", "output_tokens": "12"}'], 1, "'output_tokens' must be a positive integer"),
        (['{"prompt": "b", "bucket": 3}'], 1, "'bucket' must be a non-empty string"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, lines, line, message):
    path = write(tmp_path / "bad.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(WorkloadError, match=rf"bad\.jsonl:{line}: {message}"):
        read_dataset(path)


def test_jsonl_lines_end_at_newline_only_as_json_has_it(tmp_path):
    """U+2028, U+2029 and U+0085 raw inside a string (``json.dumps(ensure_ascii=False)`` writes them so) are text,
    not line ends; a UTF-8 byte-order mark at the start is skipped; CRLF line ends are fine."""
    prompts = ["one\u2028two", "three\u2029four", "five\u0085six", "plain"]
    body = "\r\n".join(json.dumps({"prompt": p}, ensure_ascii=False) for p in prompts)
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    records, skipped = read_dataset(path)
    assert [r.prompt for r in records] == prompts and skipped == 0
    assert [r.where for r in records] == [f"{path}:{n}" for n in (1, 2, 3, 4)]


def test_missing_and_empty_dataset(tmp_path):
    with pytest.raises(WorkloadError, match="nope.jsonl: dataset file not found"):
        Workload.from_spec(spec(dataset="nope.jsonl"), FakeCounter(), tmp_path)
    with pytest.raises(WorkloadError, match="empty.jsonl: no usable prompts"):
        read_dataset(write(tmp_path / "empty.jsonl", "\n\n"))
    with pytest.raises(WorkloadError, match="nothing.jsonl: no usable prompts"):
        read_dataset(write(tmp_path / "nothing.jsonl", ""))
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(WorkloadError, match="folder.jsonl: is a directory; load.dataset names one"):
        read_dataset(tmp_path / "folder.jsonl")


SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "what is the capital of france"},
            {"from": "gpt", "value": "the capital of france is paris"},
        ],
    },
    {
        "id": "b",
        "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "name three colours"},
            {"from": "gpt", "value": "red green blue"},
            {"from": "human", "value": "and two more"},
        ],
    },
    {"id": "c", "conversations": [{"from": "gpt", "value": "a reply with no question"}]},  # skipped
    {"id": "d", "conversations": [{"from": "human", "value": "no answer here"}]},
]


def test_sharegpt_dataset(tmp_path):
    path = write(tmp_path / "sharegpt.json", json.dumps(SHAREGPT, indent=2))
    workload = Workload.from_spec(spec(dataset=str(path), max_tokens=50), FakeCounter(), tmp_path)
    items = workload.pools["dataset"]
    assert [(it.prompt, it.prompt_tokens, it.max_tokens, it.exact) for it in items] == [
        ("what is the capital of france", 7, 7, True),  # max_tokens = tokens of the gpt answer
        ("name three colours", 4, 3, True),  # the first human turn, its answer
        ("no answer here", 3, 50, True),  # no answer: load.max_tokens
    ]
    assert workload.skipped == 1 and workload.describe()["skipped_conversations"] == 1
    assert items[0].prompt_id == f"{path}:2" and items[1].prompt_id.startswith(f"{path}:")
    # No counter: prompt lengths are estimates and max_tokens falls back to the scenario's.
    rough = Workload.from_spec(spec(dataset=str(path), max_tokens=50), None, tmp_path)
    assert [(it.max_tokens, it.exact) for it in rough.pools["dataset"]] == [(50, False)] * 3


def test_sharegpt_lines_in_jsonl(tmp_path):
    path = write(tmp_path / "conv.jsonl", "\n".join(json.dumps(c) for c in SHAREGPT))
    records, skipped = read_dataset(path)
    assert [r.prompt for r in records] == ["what is the capital of france", "name three colours", "no answer here"]
    assert skipped == 1 and records[1].where == f"{path}:2"


def test_sharegpt_errors_name_file_and_line(tmp_path):
    entries = [SHAREGPT[0], {"id": "x", "conversations": "not a list"}]
    text = json.dumps(entries, indent=2)
    bad_line = text.splitlines().index("  {", 2) + 1  # the second entry's opening brace
    path = write(tmp_path / "conv.json", text)
    with pytest.raises(WorkloadError, match=rf"conv\.json:{bad_line}: 'conversations' must be a list"):
        read_dataset(path)

    path = write(tmp_path / "turn.json", json.dumps([{"conversations": [{"from": "human"}]}]))
    with pytest.raises(
        WorkloadError,
        match=r"turn\.json:1: conversations\[0\] must be an object with string "
        r"'from' and 'value'",
    ):
        read_dataset(path)

    path = write(tmp_path / "broken.json", '[\n  {"conversations": []},\n  {"conversations": [}\n]\n')
    with pytest.raises(WorkloadError, match=r"broken\.json:3:22: not valid JSON"):
        read_dataset(path)

    path = write(tmp_path / "trailing.json", '[{"conversations": []}]\n]\n')
    with pytest.raises(WorkloadError, match=r"trailing\.json:2: not valid JSON: extra data"):
        read_dataset(path)

    path = write(tmp_path / "none.json", json.dumps([SHAREGPT[2]]))
    with pytest.raises(WorkloadError, match=r"none\.json: no usable prompts \(1 conversations without a human"):
        read_dataset(path)


# ----------------------------------------------------------------------------- /tokenize clients


class TokenizeServer:
    """A loopback /tokenize endpoint in llama.cpp's or vLLM's request/response shape (or none)."""

    def __init__(self, shape: str):
        counter, received = FakeCounter(), []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.append((self.path, body))
                reply, status = None, 404
                if self.path == "/tokenize" and shape == "llamacpp":
                    # Like llama.cpp: no 'content' means nothing to tokenize.
                    n = counter.count(body.get("content", ""))
                    reply, status = {"tokens": list(range(n))}, 200
                elif self.path == "/tokenize" and shape == "vllm":
                    if not isinstance(body.get("prompt"), str):
                        reply, status = {"object": "error", "message": "Field required: prompt"}, 400
                    else:
                        n = counter.count(body["prompt"])
                        reply, status = {"count": n, "max_model_len": 4096, "tokens": list(range(n))}, 200
                data = json.dumps(reply or {"detail": "Not Found"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.received = received
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("shape", ["llamacpp", "vllm"])
def test_server_tokenizer_shapes(shape):
    with TokenizeServer(shape) as server:
        tok = ServerTokenizer(server.url + "/v1", model="m")
        assert tok.count("one two seventeen") == 4 and tok.shape == shape
        last = server.received[-1][1]
        assert tok.count("") == 0
        assert ServerTokenizer.available(server.url)
        if shape == "llamacpp":
            assert last == {"content": "one two seventeen", "add_special": False}
        else:
            assert last == {"model": "m", "prompt": "one two seventeen", "add_special_tokens": False}
        # The shape is remembered: one request per count after detection.
        before = len(server.received)
        tok.count("a b c")
        assert len(server.received) == before + 1
        # A whole workload built through HTTP is exact.
        workload = Workload.from_spec(spec(prompt_tokens=40, unique_prefix=True), tok, Path("."), pool_size=4)
        assert all(FakeCounter().count(workload.item(0, 0, k).prompt) == 40 for k in range(10))
        assert isinstance(counter_for(server.url), ServerTokenizer)


def test_server_without_tokenize():
    with TokenizeServer("none") as server:
        assert not ServerTokenizer.available(server.url)
        with pytest.raises(WorkloadError, match=r"no usable POST /tokenize endpoint.*HTTP 404"):
            ServerTokenizer(server.url).count("hello")
        assert counter_for(server.url) is None


def test_server_not_listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port now.
    assert not ServerTokenizer.available(f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(WorkloadError, match="cannot reach"):
        ServerTokenizer(f"http://127.0.0.1:{port}", timeout=2).count("hello")


# ----------------------------------------------------------------------------- a real tokenizer


@pytest.mark.server
def test_exact_lengths_with_llama_server(tmp_path):
    """The real SentencePiece tokenizer of the generated test model, through llama-server's /tokenize."""
    from tests.helpers import require_llama_server

    require_llama_server()
    from locust_llm import tinymodel
    from locust_llm.servers.base import free_port
    from locust_llm.servers.llamacpp import bundled_server

    pair = tinymodel.generate(tmp_path / "model", "test", seed=0)
    port = free_port()
    binary = bundled_server() or "llama-server"
    proc = subprocess.Popen(
        [binary, "-m", str(pair.target), "--host", "127.0.0.1", "--port", str(port), "-c", "2048"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):  # readiness poll, not a timing assertion
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, "llama-server exited during start-up"
                time.sleep(0.1)
        tok = ServerTokenizer(url)
        buckets = {"short": Bucket(prompt_tokens=40, max_tokens=8), "long": Bucket(prompt_tokens=600, max_tokens=8)}
        workload = Workload.from_spec(spec(buckets=buckets, unique_prefix=True, seed=3), tok, Path("."), pool_size=8)
        assert tok.shape == "llamacpp" and workload.exact
        for k in range(30):
            it = workload.item(k % 3, k % 2, k)
            assert tok.count(it.prompt) == it.prompt_tokens == buckets[it.bucket].prompt_tokens
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_prompt_item_is_frozen():
    item = PromptItem("b", "p", 1, 2, True)
    with pytest.raises(AttributeError):
        item.prompt = "x"  # type: ignore[misc]


# ----------------------------------------------------------------------------- the prompt cache


def test_prompts_are_cold_by_default_and_pair_across_variants():
    """No prompt repeats within a run (warm-up and steady share a step; blocks, levels, repeats and soak windows are
    steps), though the pool holds 8; request k of a step is the same prompt in every variant's process."""
    load = spec(prompt_tokens=40)
    assert load.unique_prefix and load.prompt_cache == "cold"
    a, b = (Workload.from_spec(load, FakeCounter(), Path("."), pool_size=8) for _ in range(2))
    seen = set()
    for worker in range(2):
        for step in range(4):
            for k in range(100):
                item = a.item(worker, step, k)
                assert item == b.item(worker, step, k)
                assert FakeCounter().count(item.prompt) == item.prompt_tokens == 40
                seen.add(item.prompt)
    assert len(seen) == 2 * 4 * 100
    assert a.describe()["prompt_cache"] == "cold" and a.describe()["unique_prefix_tokens"] == a.prefix_tokens > 0


def test_shared_prefix_every_prompt_starts_with_one_of_its_groups_then_a_unique_remainder():
    load = spec(prompt_tokens=60, shared_prefix={"tokens": 24, "groups": 3})
    assert load.prompt_cache == "shared"
    workload = Workload.from_spec(load, FakeCounter(), Path("."), pool_size=8)
    counter = FakeCounter()
    primers = workload.primers()
    assert len({p.prompt for p in primers}) == 3
    assert all(counter.count(p.prompt) == p.prompt_tokens == 24 and p.max_tokens == 1 for p in primers)
    used, remainders = Counter(), set()
    for step in range(3):
        for k in range(300):
            item = workload.item(1, step, k)
            assert counter.count(item.prompt) == item.prompt_tokens == 60
            (prefix,) = [p.prompt for p in primers if item.prompt.startswith(p.prompt + " ")]
            assert workload.item(1, 0, k).prompt.startswith(prefix + " ")  # its group: the same in every step
            used[prefix] += 1
            remainders.add(item.prompt[len(prefix) :])
    assert len(remainders) == 900 and min(used.values()) > 200  # unique remainders; the groups share the load
    assert workload.describe()["shared_prefix"] == {"tokens": 24, "groups": 3}


def test_shared_prefix_needs_room_and_a_unique_remainder():
    with pytest.raises(WorkloadError, match=r"shared prefix and unique prefix.*lower shared_prefix.tokens"):
        Workload.from_spec(spec(prompt_tokens=20, shared_prefix={"tokens": 16}), FakeCounter(), Path("."), pool_size=2)
    with pytest.raises(ValueError, match="shared_prefix puts a unique remainder"):
        spec(prompt_tokens=60, shared_prefix={"tokens": 16}, unique_prefix=False)


def test_a_dataset_smaller_than_the_run_is_cycled_each_request_with_its_own_marker(tmp_path):
    rows = [f"tell me about the city number {i}" for i in range(3)]
    write(tmp_path / "d.jsonl", "\n".join(json.dumps({"prompt": r}) for r in rows))
    workload = Workload.from_spec(spec(dataset="d.jsonl"), FakeCounter(), tmp_path)
    marker = workload.describe()["unique_prefix_tokens"]
    items = [workload.item(0, step, k) for step in range(2) for k in range(50)]
    assert len({it.prompt for it in items}) == 100
    for it in items:
        body = it.prompt.split(" ", workload.prefixer.length)[-1]
        assert body in rows and it.prompt_tokens == FakeCounter().count(body) + marker == FakeCounter().count(it.prompt)
