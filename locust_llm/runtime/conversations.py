"""Conversations in flight (``load.conversation``): the turns of one conversation, sent one after the other by a
Locust user, each request carrying the whole history with the answers the server returned.

A conversation belongs to the step it started in: it sends its next turn only while that step runs, so a
conversation in flight when its step ends finishes the turn it is in and stops there. Its records say which turn
they were and how many the conversation was to have (``turn``, ``turns``), so the analysis counts the conversations
cut short; a turn that fails ends its conversation (no answer to carry on with), and is recorded as the failure.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from .steps import StepState, step_key

__all__ = ["Dialogue", "converse"]


@dataclass
class Dialogue:
    """One conversation: its number in the worker's step, the turns it will send, its session header and the
    history so far."""

    number: int
    turns: int
    headers: tuple[tuple[str, str], ...] = ()
    messages: list[dict[str, str]] = field(default_factory=list)
    tokens: int = 0  # prompt and answer tokens of the history (the server's chat template adds its own on top)

    def request(self, prompt: str) -> tuple[dict[str, str], ...]:
        """The messages of the next turn: the history, then the new user message."""
        return (*self.messages, {"role": "user", "content": prompt})

    def history(self) -> str | None:
        """A hash of the answers in the history (None before the first answer): equal histories, equal hashes."""
        answers = [m["content"] for m in self.messages if m["role"] == "assistant"]
        if not answers:
            return None
        return hashlib.blake2b("\x1e".join(answers).encode(), digest_size=8).hexdigest()

    def add(self, prompt: str, prompt_tokens: int, answer: str, answer_tokens: int) -> None:
        self.messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
        self.tokens += prompt_tokens + answer_tokens


def converse(user, state: StepState, number: int, t_intended: float = math.nan) -> None:
    """Conversation ``number`` of this worker in ``state``'s step, turn by turn: the first at ``t_intended`` (open
    loop; NaN in a closed loop), each later one ``think_s`` after the answer before it (its intended time)."""
    ctx = user.context
    spec = ctx.load.conversation
    conversations = ctx.workload(state.base_url).conversations
    key = step_key(state)
    session = f"{state.run_id}-{state.variant}-s{state.step}-w{ctx.worker}-c{number}"
    dialogue = Dialogue(
        number,
        conversations.turns(ctx.worker, number),
        ((spec.session_header, session),) if spec.session_header else (),
    )
    for turn in range(1, dialogue.turns + 1):
        state = ctx.board.state
        if step_key(state) != key or not state.active:
            return  # the step ended: the conversation is cut short after its last turn
        record = user.new_record(state, t_intended)
        record.seq = number * spec.turns + turn - 1
        record.conversation, record.turn, record.turns = number, turn, dialogue.turns
        user.send(state, record, dialogue)
        if not record.ok or turn == dialogue.turns:
            return
        t_next = record.t_done + spec.think_s
        t_intended = t_next if not math.isnan(t_intended) else math.nan
        if not ctx.board.wait_until(key, t_next):
            return
