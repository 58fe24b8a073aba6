"""``consistency.json``, typed: each variant's greedy answers to the fixed consistency prompts.

The client asks (``client.greedy``: an ``Answer`` per prompt), the runtime writes the file before each variant's
ladder (``runtime.session``), ``rundir.load`` reads it back and the analysis compares every variant's answers with
the baseline's token by token (``analysis.agreement``). The schema is published as ``docs/consistency.schema.json``
(``locust-llm schema consistency``).
"""

from __future__ import annotations

from pydantic import RootModel

from .base import RunFileModel

__all__ = ["Answer", "Consistency", "ConsistencyAnswer", "consistency_schema"]


class Answer(RunFileModel):
    """One completion as the client got it: its text and token ids, or why there is none."""

    text: str | None
    """The completion's text; null when the request failed."""
    tokens: list[int] | None = None
    """Its token ids where the server returned them (llama.cpp ``/completion``, vLLM ``return_token_ids``); null
    otherwise (the text is compared then)."""
    error: str | None = None
    """Why there is no answer (the HTTP status and message, a timeout, not asked after an earlier failure), cut to
    300 characters; absent when the server answered."""


class ConsistencyAnswer(RunFileModel):
    """A variant's greedy answer to one consistency prompt (prompts pair up by position across variants)."""

    prompt_id: str
    """The prompt's id in the workload (its position when the workload gives none)."""
    max_tokens: int
    """Tokens asked for."""
    text: str | None
    """The completion's text; null when the request failed."""
    tokens: list[int] | None = None
    """Its token ids where the server returned them; null otherwise (the text is compared then)."""
    error: str | None = None
    """Why there is no answer, cut to 300 characters; absent when the server answered."""
    repeat: Answer | None = None
    """The baseline only: its second answer to the same prompt, asked right after the first, so that a variant's
    divergence can be told apart from a server that is not deterministic even alone; absent otherwise."""

    @classmethod
    def of(cls, prompt_id: str, max_tokens: int, answer: Answer) -> ConsistencyAnswer:
        return cls(prompt_id=prompt_id, max_tokens=max_tokens, **answer.model_dump(exclude_unset=True))


class Consistency(RootModel[dict[str, list[ConsistencyAnswer]]]):
    """``consistency.json``: variant -> its answers, one per consistency prompt, in the prompts' order."""


def consistency_schema() -> dict:
    """The JSON Schema of ``consistency.json`` (written to ``docs/consistency.schema.json``)."""
    return Consistency.model_json_schema()
