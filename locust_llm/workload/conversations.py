"""The user side of multi-turn conversations (``Conversations``): which user message turn t of a worker's
conversation k sends, and how many turns it has. No Locust imports; the history (the server's own answers) is kept
by the runtime, turn by turn.

* **Generated** messages come from the workload's pools (exact token lengths): turn t of conversation k is the
  workload's request ``k * turns + t - 1``, so each turn has its own prompt, the same in every variant.
* **Dataset** messages are the human turns of a ShareGPT conversation (the recorded answers are never sent: the
  server's own answers are); conversation k of a worker draws one of the dataset's conversations by a seeded hash,
  the same in every variant. A conversation with fewer human turns than ``turns`` ends after its last one.
* **The server's context** bounds a conversation: turn t's request holds every earlier message and answer, so with
  ``context`` known, a conversation ends before the turn whose user messages and output lengths so far (answers at
  most their ``max_tokens``) would not fit. Those turns are never sent; ``describe`` counts them. The chat template
  adds a few tokens per message on top, which the bound leaves to the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from ..scenario.traffic import ConversationSpec
from .datasets import DatasetRecord
from .items import PromptItem, WorkloadError, hash64
from .tokenizers import TokenCounter

__all__ = ["Conversations", "dialogue_items"]


class Prompts(Protocol):
    """What conversations take from the workload (``Workload``): its prompts and its unique prefixes."""

    seed: int
    prefixer: object | None
    prefix_tokens: int

    def item(self, worker: int, step: int, index: int) -> PromptItem: ...

    def _prefixed(self, base: PromptItem, worker: int, step: int, index: int) -> PromptItem: ...

    def __iter__(self) -> Iterator[PromptItem]: ...


def dialogue_items(
    records: list[DatasetRecord],
    turns: int,
    default_max_tokens: int,
    counter: TokenCounter,
    exact: bool,
    measure,
) -> list[tuple[PromptItem, ...]]:
    """Per dataset conversation, its first ``turns`` human turns as prompts; each turn's output length is its
    recorded answer's (when a tokenizer counts it), else ``default_max_tokens``."""
    out = []
    for record in records:
        pairs = record.turns or ((record.prompt, record.answer),)
        items = []
        for t, (text, answer) in enumerate(pairs[:turns], start=1):
            if record.max_tokens is not None:
                max_tokens = record.max_tokens
            elif answer and exact:
                max_tokens = max(1, counter.count(answer))
            else:
                max_tokens = default_max_tokens
            items.append(PromptItem("dialogue", text, measure(text), max_tokens, exact, f"{record.where} turn {t}"))
        out.append(tuple(items))
    return out


def fitting_turns(lengths: list[tuple[int, int]], context: int | None) -> int:
    """How many of the turns (user tokens, output tokens) fit ``context`` with every earlier turn in the history."""
    total = 0
    for t, (prompt, output) in enumerate(lengths):
        total += prompt + output
        if context is not None and total > context:
            return t
    return len(lengths)


class Conversations:
    def __init__(
        self,
        workload: Prompts,
        spec: ConversationSpec,
        dialogues: list[tuple[PromptItem, ...]] | None = None,
        context: int | None = None,
    ):
        self.workload, self.spec, self.context = workload, spec, context
        self.cut_by_context = 0  # dataset turns (of the sampled conversations) that do not fit the context
        self.dialogues: list[tuple[PromptItem, ...]] = []
        prefix = workload.prefix_tokens
        for dialogue in dialogues or []:
            fit = fitting_turns([(i.prompt_tokens + prefix, i.max_tokens) for i in dialogue], context)
            self.cut_by_context += len(dialogue) - fit
            if fit:
                self.dialogues.append(dialogue[:fit])
        if dialogues is not None and not self.dialogues:
            raise WorkloadError(
                f"conversation: no conversation of the dataset fits the server's {context}-token context with its "
                "first turn's prompt and output"
            )
        # Generated turns: the longest bucket bounds every turn, so every conversation has the same turns.
        longest = max((i.prompt_tokens + prefix, i.max_tokens) for i in workload)
        self.generated_turns = fitting_turns([longest] * spec.turns, context)
        if dialogues is None and not self.generated_turns:
            raise WorkloadError(
                f"conversation: a first turn of {longest[0]} prompt and {longest[1]} output tokens does not fit the "
                f"server's {context}-token context; shorten prompt_tokens/max_tokens or raise the server's context"
            )

    def _dialogue(self, worker: int, conversation: int) -> tuple[PromptItem, ...]:
        return self.dialogues[hash64(self.workload.seed, "dialogue", worker, conversation) % len(self.dialogues)]

    def turns(self, worker: int, conversation: int) -> int:
        """The turns conversation ``conversation`` of ``worker`` will send (all of them unless cut short)."""
        if self.dialogues:
            return len(self._dialogue(worker, conversation))
        return self.generated_turns

    def message(self, worker: int, step: int, conversation: int, turn: int) -> PromptItem:
        """The user message of ``turn`` (1-based): the same in every variant."""
        index = conversation * self.spec.turns + turn - 1
        if not self.dialogues:
            return self.workload.item(worker, step, index)
        base = self._dialogue(worker, conversation)[turn - 1]
        return self.workload._prefixed(base, worker, step, index) if self.workload.prefixer else base

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "turns": self.spec.turns,
            "think_s": self.spec.think_s,
            "session_header": self.spec.session_header,
            "context": self.context,
        }
        if self.dialogues:
            lengths = [len(d) for d in self.dialogues]
            described.update(
                source="dataset",
                dialogues=len(self.dialogues),
                turns_per_dialogue={"min": min(lengths), "max": max(lengths), "mean": sum(lengths) / len(lengths)},
                turns_over_context=self.cut_by_context,
            )
        else:
            described.update(
                source="generated",
                turns_that_fit=self.generated_turns,
                turns_over_context=self.spec.turns - self.generated_turns,
            )
        return described
