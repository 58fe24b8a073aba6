"""Greedy outputs of fixed prompts per variant, for the baseline-vs-speculative agreement check.

Under greedy decoding speculation must not change a single token; a divergence is a defect of the
server configuration. Token ids are used where the server returns them (llama.cpp ``/completion``
with ``return_tokens``, vLLM ``return_token_ids``); otherwise the text is compared.
"""

from __future__ import annotations

import json
import time

import gevent
from gevent.event import Event

from ..rundir.consistency import Answer, ConsistencyAnswer
from ..workload import PromptItem
from .engines import greedy_answer, greedy_request
from .http import requests, session

__all__ = ["greedy_output", "greedy_outputs"]


MAX_ANSWER_BYTES = 1 << 20
PROMPT_TIMEOUT_S = 120.0


class _Deadline(Exception):
    """Not a TimeoutError: the HTTP stack must not mistake it for (and swallow it as) a socket timeout."""


def greedy_output(
    http: requests.Session,
    base_url: str,
    engine: str,
    model: str,
    prompt: str,
    max_tokens: int,
    timeout_s: float = PROMPT_TIMEOUT_S,
    **sampling,
) -> Answer:
    """One greedy answer (or, with ``sampling``: ``temperature``, ``seed``, ``ignore_eos``, one seeded sample),
    within ``timeout_s`` in all (a server that trickles or never ends is cut off). An answer that does not fit its
    record (token ids that are not integers) is a failure like any other."""
    path, body = greedy_request(engine, model, prompt, max_tokens, **sampling)
    try:
        with gevent.Timeout(timeout_s, _Deadline(f"no complete answer within {timeout_s:.3g} s")):
            answer = http.post(f"{base_url}{path}", json=body, timeout=timeout_s, stream=True)
            raw = answer.raw.read(MAX_ANSWER_BYTES + 1, decode_content=True)
            answer.close()
        if answer.status_code != 200:
            raise ValueError(f"HTTP {answer.status_code}: {raw[:200].decode('utf-8', 'replace')}")
        if len(raw) > MAX_ANSWER_BYTES:
            raise ValueError(f"answer longer than {MAX_ANSWER_BYTES} bytes")
        return Answer.model_validate(greedy_answer(engine, json.loads(raw)))
    except Exception as exc:  # any failure of the probe is recorded, and the run goes on
        return _failed(f"{type(exc).__name__}: {exc}")


def _failed(error: str) -> Answer:
    return Answer(text=None, tokens=None, error=error[:300])


def greedy_outputs(
    base_url: str,
    engine: str,
    model: str,
    prompts: list[PromptItem],
    deadline_s: float = PROMPT_TIMEOUT_S,
    stop: Event | None = None,
) -> list[ConsistencyAnswer]:
    """One answer per prompt, all within ``deadline_s``. After the first failure, or once ``stop`` is set (SIGTERM),
    no further prompt is asked: those get an error saying why, so answers still pair up with prompts by index."""
    deadline = time.monotonic() + deadline_s
    answers: list[Answer] = []

    def ask() -> None:
        with session("consistency") as http:
            for item in prompts:
                left = deadline - time.monotonic()
                answers.append(
                    greedy_output(
                        http,
                        base_url,
                        engine,
                        model,
                        item.prompt,
                        item.max_tokens,
                        timeout_s=min(PROMPT_TIMEOUT_S, left),
                    )
                    if left > 0
                    else _failed(f"no time left of the check's {deadline_s:g} s")
                )
                if answers[-1].error:
                    return

    job = gevent.spawn(ask)
    gevent.wait([job] if stop is None else [job, stop], count=1)
    if not job.ready():  # stopped: the prompt in flight is abandoned
        job.kill()
        answers.append(_failed("stopped: the run was interrupted"))
    why = answers[-1].error if answers else job.exception
    while len(answers) < len(prompts):
        answers.append(_failed(f"not asked after: {why}"))
    return [
        ConsistencyAnswer.of(item.prompt_id or str(i), item.max_tokens, answer)
        for i, (item, answer) in enumerate(zip(prompts, answers, strict=False))
    ]
