"""Trace files -> records (times, lengths, windows, skipped rows, errors that name file, line and field), and the
prompts a replay sends: exact lengths, shared hash ids as shared text, cold in every step. The truth for token
counts is a whitespace word count (the reference server's tokenizer), independent of the code under test."""

import json
import os

import pytest

from locust_llm.scenario import LoadSpec
from locust_llm.scenario.traffic import TraceSpec
from locust_llm.workload import Workload, WorkloadError
from locust_llm.workload.traces import read_trace
from tests.helpers import REPO


class Words:
    """One token per whitespace-separated word, as the reference server's /tokenize counts."""

    def count(self, text: str) -> int:
        return len(text.split())


def write(tmp_path, name: str, lines: list) -> str:
    path = tmp_path / name
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return str(path)


def mooncake(tmp_path, records: list[dict], name: str = "t.jsonl") -> str:
    return write(tmp_path, name, records)


def test_mooncake_times_are_ms_relative_to_the_first_record_and_a_window_cuts_them(tmp_path):
    path = mooncake(
        tmp_path,
        [{"timestamp": 5000 + 250 * i, "input_length": 10 + i, "output_length": 3, "hash_ids": [i]} for i in range(8)],
    )
    whole = read_trace(TraceSpec(path=path, format="mooncake", block_tokens=32), path)
    assert [r.t_s for r in whole.records] == [0.25 * i for i in range(8)]
    assert [r.input_tokens for r in whole.records] == list(range(10, 18))
    assert whole.span_s == 1.75 and whole.rate == 8 / 1.75
    cut = read_trace(TraceSpec(path=path, format="mooncake", block_tokens=32, start_s=0.5, duration_s=1.0), path)
    # Records at 0.5, 0.75, 1.0 and 1.25 s after the first; times now from the window's start.
    assert [r.t_s for r in cut.records] == [0.0, 0.25, 0.5, 0.75]
    assert [r.input_tokens for r in cut.records] == [12, 13, 14, 15]
    assert (cut.outside, cut.span_s, cut.rows) == (4, 1.0, 8)
    assert cut.records[0].where == f"{path}:3"


def test_azure_datetimes_with_seven_fraction_digits_and_a_zone_become_seconds(tmp_path):
    path = write(
        tmp_path,
        "azure.csv",
        [
            "TIMESTAMP,ContextTokens,GeneratedTokens",
            "2023-11-16 18:15:46.6805900,374,44",
            "2023-11-16 18:15:47.1805900,396,109",
            "2023-11-16 20:16:46.6805900+02:00,10,5",
        ],
    )
    trace = read_trace(TraceSpec(path=path, format="azure"), path)
    assert [r.t_s for r in trace.records] == pytest.approx([0.0, 0.5, 60.0], abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in trace.records] == [(374, 44), (396, 109), (10, 5)]


def test_burstgpt_failed_rows_are_skipped_and_counted(tmp_path):
    path = write(
        tmp_path,
        "burst.csv",
        [
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
            "5,ChatGPT,472,18,490,Conversation log",
            "45,ChatGPT,1087,0,1087,Conversation log",
            "118,GPT-4,417,276,693,Conversation log",
        ],
    )
    trace = read_trace(TraceSpec(path=path, format="burstgpt"), path)
    assert [(r.t_s, r.input_tokens, r.output_tokens) for r in trace.records] == [(0.0, 472, 18), (113.0, 417, 276)]
    assert trace.skipped == {"failed (Response tokens 0)": 1}
    assert trace.describe()["skipped_rows"] == {"failed (Response tokens 0)": 1}


@pytest.mark.parametrize(
    ("lines", "fmt", "where", "words"),
    [
        ([{"timestamp": 0, "input_length": 5, "output_length": 2}, {"timestamp": 1, "output_length": 2}],
         "mooncake", ":2", "missing field 'input_length'"),
        ([{"timestamp": 10, "input_length": 5, "output_length": 2}, {"timestamp": 5, "input_length": 5,
          "output_length": 2}], "mooncake", ":2", "earlier than the record before"),
        ([{"timestamp": 0, "input_length": "many", "output_length": 2}], "mooncake", ":1", "'input_length' must be"),
        ([{"timestamp": 0, "input_length": -3, "output_length": 2}], "mooncake", ":1", "'input_length' must be"),
        (["{not json"], "mooncake", ":1", "not valid JSON"),
        ([{"timestamp": 0, "input_length": 100, "output_length": 2, "hash_ids": [1]}], "mooncake", ":1",
         "'hash_ids' has 1 blocks for input_length 100"),
        (["Timestamp,Model,Request tokens", "1,x,5"], "burstgpt", ":1", "no column 'Response tokens'"),
        (["Timestamp,Model,Request tokens,Response tokens", "1,x,,5"], "burstgpt", ":2", "column 'Request tokens'"),
        (["TIMESTAMP,ContextTokens,GeneratedTokens", "yesterday,5,5"], "azure", ":2", "'TIMESTAMP' must be a time"),
    ],
)  # fmt: skip
def test_a_malformed_trace_names_the_file_the_line_and_the_field(tmp_path, lines, fmt, where, words):
    path = write(tmp_path, "bad.txt", lines)
    with pytest.raises(WorkloadError) as err:
        read_trace(TraceSpec(path=path, format=fmt, block_tokens=16), path)
    message = str(err.value)
    assert message.startswith(f"{path}{where}: ") and words in message, message
    assert "\n" not in message


def test_an_empty_window_and_records_at_one_instant_are_errors(tmp_path):
    path = mooncake(tmp_path, [{"timestamp": 0, "input_length": 4, "output_length": 2}] * 3)
    with pytest.raises(WorkloadError, match="all arrive at one instant; give load.trace.duration_s"):
        read_trace(TraceSpec(path=path, format="mooncake"), path)
    assert read_trace(TraceSpec(path=path, format="mooncake", duration_s=2), path).rate == 1.5
    with pytest.raises(WorkloadError, match="no record to replay"):
        read_trace(TraceSpec(path=path, format="mooncake", start_s=5), path)


def replay(tmp_path, records: list[dict], context: int | None = None, block: int = 16) -> Workload:
    mooncake(tmp_path, records)
    load = LoadSpec.model_validate({"trace": {"path": "t.jsonl", "format": "mooncake", "block_tokens": block}})
    return Workload.from_spec(load, Words(), tmp_path, context=context)


def common_words(a: str, b: str) -> int:
    return len(os.path.commonprefix([a.split(), b.split()]))


SHARED = [
    {"timestamp": 0, "input_length": 40, "output_length": 4, "hash_ids": [7, 8, 9]},
    {"timestamp": 100, "input_length": 48, "output_length": 4, "hash_ids": [7, 8, 10]},
    {"timestamp": 200, "input_length": 33, "output_length": 4, "hash_ids": [7, 11, 12]},
    {"timestamp": 300, "input_length": 50, "output_length": 4, "hash_ids": [20, 21, 22, 23]},
    {"timestamp": 400, "input_length": 5, "output_length": 4},
    {"timestamp": 500, "input_length": 90, "output_length": 9},
]


def test_replayed_prompts_have_the_traces_exact_lengths_and_share_what_their_hash_ids_share(tmp_path):
    prompts = replay(tmp_path, SHARED).trace
    items = [prompts.item(i, step=0) for i in range(len(SHARED))]
    assert [Words().count(it.prompt) for it in items] == [r["input_length"] for r in SHARED]
    assert [it.max_tokens for it in items] == [r["output_length"] for r in SHARED]
    assert all(it.exact for it in items)
    # Leading ids in common -> that many whole blocks of text in common, and not a whole block more.
    for i, a in enumerate(SHARED):
        for j, b in enumerate(SHARED[i + 1 :], start=i + 1):
            shared = len(os.path.commonprefix([a.get("hash_ids", []), b.get("hash_ids", [])]))
            common = common_words(items[i].prompt, items[j].prompt)
            assert shared * 16 <= common < (shared + 1) * 16, (i, j, shared, common)
    assert prompts.describe()["shared_blocks"] == 3  # 7 and 8 in record 1, 7 in record 2: ids seen before


def test_every_step_replays_cold_prompts_and_variants_get_the_same_text(tmp_path):
    first = replay(tmp_path, SHARED).trace
    again = replay(tmp_path, SHARED).trace  # another process, or another variant's server
    for i in range(len(SHARED)):
        assert first.item(i, step=3).prompt == again.item(i, step=3).prompt
        if SHARED[i]["input_length"] > first.prefix_cost[True]:
            assert common_words(first.item(i, step=0).prompt, first.item(i, step=1).prompt) < 16


def test_records_over_the_context_are_counted_and_never_fit(tmp_path):
    prompts = replay(tmp_path, SHARED, context=45).trace
    fits = [prompts.fits(i) for i in range(len(SHARED))]
    assert fits == [r["input_length"] + r["output_length"] <= 45 for r in SHARED]
    assert prompts.over_context == fits.count(False) == 3
    assert prompts.describe()["over_context"] == 3


def test_records_that_differ_only_in_a_short_last_block_still_differ(tmp_path):
    # Both share block 7 and end in a 4-token block of their own (shorter than a block's unique prefix).
    tails = [
        {"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [7, 30]},
        {"timestamp": 10, "input_length": 20, "output_length": 2, "hash_ids": [7, 31]},
        {"timestamp": 20, "input_length": 3, "output_length": 2},
        {"timestamp": 30, "input_length": 3, "output_length": 2},
    ]
    prompts = replay(tmp_path, tails).trace
    texts = [prompts.item(i, step=0).prompt for i in range(len(tails))]
    assert [Words().count(t) for t in texts] == [20, 20, 3, 3]
    assert len(set(texts)) == len(texts)
    assert common_words(texts[0], texts[1]) >= 16


def test_records_that_share_all_but_a_short_last_block_are_distinct_prompts_whatever_the_nonce(tmp_path):
    # Every other record shares blocks 1 and 2 (or 1), the rest of each is fresh, and many end in a block of one to
    # four tokens: those were spelled by one or two words of a hash of the block's number, which made two of them the
    # same prompt (a whole-prompt cache hit) for about a quarter of the runs' nonces.
    records, fresh = [], 100
    for i in range(64):
        n = [20, 33, 48, 64, 90][i % 5]
        ids = [1, 2][: min(2, n // 16)] if i % 2 == 0 else []
        while len(ids) < -(-n // 16):
            ids.append(fresh)
            fresh += 1
        records.append({"timestamp": 10 * i, "input_length": n, "output_length": 2, "hash_ids": ids})
    mooncake(tmp_path, records)
    load = LoadSpec.model_validate({"trace": {"path": "t.jsonl", "format": "mooncake", "block_tokens": 16}})
    for nonce in range(0, 40 * 0x9E3779B9, 0x9E3779B9):
        prompts = Workload.from_spec(load, Words(), tmp_path, nonce=nonce).trace
        texts = [prompts.item(i, step).prompt for step in range(2) for i in range(len(records))]
        assert len(set(texts)) == len(texts), hex(nonce)
        assert [Words().count(t) for t in texts[:64]] == [r["input_length"] for r in records]
    # A block shorter than one word's cost (a tokenizer whose words cost 2) is filler only: its rank spells no word.
    assert prompts._rank_words((0,), prompts.ids[0][-1], 0, 0) == []


@pytest.mark.parametrize(
    ("name", "fmt", "records", "skipped"),
    [
        ("bursty-mooncake.jsonl", "mooncake", 68, {}),
        ("azure-sample.csv", "azure", 40, {}),
        ("burstgpt-sample.csv", "burstgpt", 37, {"failed (Response tokens 0)": 3}),
    ],
)
def test_the_shipped_sample_traces_read(name, fmt, records, skipped):
    path = REPO / "scenarios" / "traces" / name
    trace = read_trace(TraceSpec(path=str(path), format=fmt, block_tokens=64), path)
    assert (len(trace.records), trace.skipped) == (records, skipped)
