"""The server's own token counter (``POST /tokenize``), and the counter a scenario's ``load.tokenizer`` names.

Used at set-up and between measured windows (never on a request's path). Speaks the llama.cpp and vLLM/SGLang
shapes of ``POST /tokenize`` (``client.engines``) through ``client.control`` (a total deadline, a byte cap). The local
and estimated counters are ``workload.tokenizers``.
"""

from __future__ import annotations

import json

import gevent.pool

from ..workload.items import WorkloadError
from ..workload.tokenizers import LocalTokenizer, TokenCounter
from . import control
from .engines import TOKENIZE_SHAPES, tokenize_body

__all__ = ["ServerTokenizer", "counter_for"]


class ServerTokenizer:
    """Counts tokens with the inference server's own tokenize endpoint (the tokenizer it serves).

    Shapes tried, in order, on the first call; the one that works is remembered:

    * ``llamacpp``: ``POST /tokenize {"content": text, "add_special": false}`` -> ``{"tokens": [...]}``
    * ``vllm`` (vLLM, SGLang): ``POST /tokenize {"model": m, "prompt": text,
      "add_special_tokens": false}`` -> ``{"count": n, "tokens": [...]}``
    """

    SHAPES = TOKENIZE_SHAPES
    PROBE = "hello world"
    # A tokenize answer lists every token id: a long-context prompt's fits many times over.
    MAX_ANSWER_BYTES = 16 << 20
    PARALLEL = 8  # calls in flight when counting many texts: a server's HTTP threads answer them side by side
    # Short texts recur (a stream's chunks are a few tokens each: " the", ",", a name): counted once per process.
    # A text's count does not depend on what was counted before, so the remembered count is the server's answer.
    MEMO_MAX_CHARS = 48
    MEMO_MAX_TEXTS = 200_000

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 10.0):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = model
        self.timeout = timeout
        self.shape: str | None = None
        self.memo: dict[str, int] = {}

    def _post(self, shape: str, text: str) -> int:
        status, raw = control.call(
            f"{self.base_url}/tokenize",
            tokenize_body(shape, text, self.model),
            timeout_s=self.timeout,
            max_bytes=self.MAX_ANSWER_BYTES,
            purpose="token counting",
        )
        if status != 200:
            raise ValueError(f"HTTP {status} {raw[:160].decode('utf-8', 'replace').strip()}")
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"unexpected response {str(data)[:80]!r}")
        tokens = data.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
        if isinstance(data.get("count"), int):
            return data["count"]
        raise ValueError(f"response has neither 'tokens' nor 'count': {str(data)[:120]!r}")

    def _detect(self) -> str:
        failures = []
        for shape in self.SHAPES:
            try:
                n = self._post(shape, self.PROBE)
            except control.Unreachable as exc:  # not listening at all: no point trying shapes
                raise WorkloadError(
                    f"cannot reach {self.base_url}/tokenize to count prompt tokens: {exc}; is the server up?"
                ) from None
            except (ValueError, OSError) as exc:
                failures.append(f"{shape} request shape: {exc}")
                continue
            if n > 0:
                return shape
            failures.append(f"{shape} request shape: {self.PROBE!r} counted as 0 tokens")
        raise WorkloadError(
            f"{self.base_url} has no usable POST /tokenize endpoint ("
            + "; ".join(failures)
            + "). Give a local tokenizer instead, or accept "
            "approximate prompt lengths (no counter: PromptItem.exact is False)"
        )

    def count(self, text: str) -> int:
        if not text:
            return 0
        known = self.memo.get(text)
        if known is not None:
            return known
        if self.shape is None:
            self.shape = self._detect()
        try:
            n = self._post(self.shape, text)
        except (ValueError, OSError) as exc:
            raise WorkloadError(
                f"tokenizing {len(text)} characters at {self.base_url}/tokenize ({self.shape} shape) failed: {exc}"
            ) from None
        if len(text) <= self.MEMO_MAX_CHARS and len(self.memo) < self.MEMO_MAX_TEXTS:
            self.memo[text] = n
        return n

    def count_each(self, texts: list[str]) -> list[int]:
        """Independent texts (the generator's vocabulary, some 450 words) counted ``PARALLEL`` at a time: one by
        one, a server 50 ms away would hold the run's start for 20 s, in every load process."""
        if self.shape is None:
            self.shape = self._detect()
        return list(gevent.pool.Pool(self.PARALLEL).imap(self.count, texts))

    @staticmethod
    def available(base_url: str, model: str | None = None, timeout: float = 5.0) -> bool:
        """True when ``base_url`` answers one of the tokenize shapes (a probe; never raises)."""
        try:
            ServerTokenizer(base_url, model, timeout).count(ServerTokenizer.PROBE)
            return True
        except WorkloadError:
            return False

    def __repr__(self) -> str:
        return f"ServerTokenizer({self.base_url!r}, model={self.model!r}, shape={self.shape!r})"


def counter_for(
    base_url: str | None, tokenizer: str = "server", model: str | None = None, timeout: float = 10.0
) -> TokenCounter | None:
    """The counter the scenario's ``load.tokenizer`` names: ``server`` (the server's ``/tokenize`` when it
    answers), ``none``, or a Hugging Face tokenizer name or path. None makes :class:`Workload` fall back to
    :class:`ApproxCounter` with ``exact=False``."""
    if tokenizer == "none":
        return None
    if tokenizer != "server":
        return LocalTokenizer(tokenizer)
    if base_url and ServerTokenizer.available(base_url, model, timeout):
        counter = ServerTokenizer(base_url, model, timeout)
        counter.count(ServerTokenizer.PROBE)  # fixes the shape now
        return counter
    return None
