"""Scenario YAML -> a typed, validated Scenario. Every error names the file, the key and the fix."""

from __future__ import annotations

import difflib
import os
import re
import reprlib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Engine = Literal["llamacpp", "vllm", "sglang", "external"]


def cache_dir() -> Path:
    """Generated models and other reusable artefacts (``$LOCUST_LLM_CACHE``, else ~/.cache/locust-llm)."""
    return Path(os.environ.get("LOCUST_LLM_CACHE", Path.home() / ".cache" / "locust-llm"))


# Run ids, variant and baseline names become file and directory names: plain names only, never a path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)


def valid_name(name: str) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name))


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message says where and how to fix it."""


class Strict(BaseModel):
    # Every number finite: NaN or infinity in a scenario (or on the command line) is an error, not a crash later.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


DAY_S = 86_400.0
MAX_LEVEL = 100_000  # users (closed loop) or requests/s (open loop)
MAX_TOKENS = 10_000_000


class TinyModelSpec(Strict):
    """A generated target/draft pair (llama.cpp only), created on first use when missing."""

    preset: Literal["test", "demo"] = "demo"
    seed: int = 0
    residual_scale: float | None = Field(default=None, ge=0)
    dir: str | None = None  # default: <cache>/models/tiny-<preset>-s<seed>


class LlamaCppSpeculative(Strict):
    """llama.cpp speculative flags (``--spec-type``, ``-md``, ``--spec-draft-*``, ``--spec-ngram-mod-*``).

    Unset numbers keep the server's defaults. Random-weight models have flat distributions, so any
    p_min above ~0.1 means no drafts at all; the tiny scenarios set 0.
    """

    type: Literal["draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple",
                  "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"] = "draft-simple"
    # Path to the draft GGUF; omitted with a tiny_model, the generated draft is used.
    draft_model: str | None = None
    n_max: int | None = Field(default=None, ge=1)
    n_min: int | None = Field(default=None, ge=0)
    p_min: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _flags_exist_for_type(self) -> "LlamaCppSpeculative":
        if not self.type.startswith("draft-"):
            if self.draft_model or self.p_min is not None:
                raise ValueError(f"type {self.type!r} drafts from n-grams: draft_model and p_min do not apply")
            if self.type != "ngram-mod" and (self.n_max is not None or self.n_min is not None):
                raise ValueError(f"type {self.type!r} has no n_max/n_min flags; pass its --spec-ngram-* "
                                 "flags in the variant's args")
        return self


VLLM_METHODS = ("ngram", "ngram_gpu", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3",
                "mtp", "deepseek_mtp", "qwen3_next_mtp", "ernie_mtp", "glm4_moe_mtp", "longcat_flash_mtp",
                "extract_hidden_states", "dflash", "custom_class")
VLLM_NEEDS_MODEL = ("draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash")


class VllmSpeculative(Strict):
    """Keys of vLLM's ``--speculative-config`` JSON (vllm/config/speculative.py)."""

    method: Literal[VLLM_METHODS]  # type: ignore[valid-type]
    num_speculative_tokens: int = Field(ge=1)
    model: str | None = None
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    quantization: str | None = None
    revision: str | None = None
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    parallel_drafting: bool | None = None
    disable_padded_drafter_batch: bool | None = None
    draft_sample_method: Literal["greedy", "probabilistic"] | None = None
    use_heterogeneous_vocab: bool | None = None
    enforce_eager: bool | None = None
    kv_cache_dtype: str | None = None
    attention_backend: str | None = None
    rejection_sample_method: str | None = None
    synthetic_acceptance_rates: list[float] | None = None
    synthetic_acceptance_length: float | None = None
    suffix_decoding_max_tree_depth: int | None = None
    suffix_decoding_max_cached_requests: int | None = None
    suffix_decoding_max_spec_factor: float | None = None
    suffix_decoding_min_token_prob: float | None = None

    @model_validator(mode="after")
    def _model_when_needed(self) -> "VllmSpeculative":
        if self.method in VLLM_NEEDS_MODEL and not self.model:
            raise ValueError(f"method {self.method!r} needs 'model' (the draft or head checkpoint)")
        return self


class SglangSpeculative(Strict):
    """SGLang ``--speculative-*`` flags."""

    algorithm: Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
    draft_model_path: str | None = None
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _all_or_none(self) -> "SglangSpeculative":
        given = [self.num_steps, self.eagle_topk, self.num_draft_tokens]
        if any(v is not None for v in given) and not all(v is not None for v in given):
            raise ValueError("set all of num_steps, eagle_topk and num_draft_tokens, or none (SGLang's rule)")
        if self.algorithm in ("EAGLE", "EAGLE3", "STANDALONE") and not self.draft_model_path:
            raise ValueError(f"algorithm {self.algorithm} needs 'draft_model_path'")
        return self


SPECULATIVE_MODELS: dict[str, type[Strict]] = {
    "llamacpp": LlamaCppSpeculative, "vllm": VllmSpeculative, "sglang": SglangSpeculative,
}


class Variant(Strict):
    """One server configuration under test; ``speculative`` omitted means no speculation."""

    speculative: dict[str, Any] | None = None
    args: list[str] = []
    env: dict[str, str] = {}


class ServerSpec(Strict):
    engine: Engine
    model: str | None = None
    served_model_name: str | None = None
    tiny_model: TinyModelSpec | None = None
    url: str | None = None  # engine: external
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)
    binary: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    startup_timeout_s: float = Field(default=300.0, gt=0, le=DAY_S)
    stop_grace_s: float = Field(default=10.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _engine_fields(self) -> "ServerSpec":
        if self.engine == "external":
            if not self.url:
                raise ValueError("engine 'external' needs 'url' (e.g. http://127.0.0.1:8000)")
        elif self.url:
            raise ValueError(f"'url' is only for engine 'external'; engine {self.engine!r} is launched locally")
        if self.tiny_model and self.engine != "llamacpp":
            raise ValueError("'tiny_model' is only for engine 'llamacpp'")
        if self.engine != "external" and not (self.model or self.tiny_model):
            raise ValueError("set 'model' (a path or model id) or, for llamacpp, 'tiny_model'")
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


class LoadSpec(Strict):
    mode: Literal["closed", "open"] = "closed"
    ladder: list[float] = [1, 2, 4, 8]
    step_duration_s: float = Field(default=30.0, gt=0, le=7 * DAY_S)
    warmup_s: float = Field(default=5.0, ge=0, le=DAY_S)
    repeats: int = Field(default=1, ge=1, le=1000)  # the whole ladder again, per variant; repeated levels are pooled
    # An unsteady step (throughput drifting within its window) is extended by half a step at a time, up to this.
    max_extend_s: float = Field(default=0.0, ge=0, le=DAY_S)
    api: Literal["completions", "chat"] = "completions"
    prompt_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)
    max_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)
    buckets: dict[str, Bucket] = {}
    dataset: str | None = None  # JSONL or ShareGPT-style JSON; overrides generated prompts
    temperature: float = Field(default=0.0, ge=0, le=100)
    ignore_eos: bool = True
    unique_prefix: bool = False
    seed: int = 0
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0, le=1000)
    max_inflight: int = Field(default=256, ge=1, le=MAX_LEVEL)
    think_time_s: float = Field(default=0.0, ge=0, le=DAY_S)
    # What counts prompt (and, without per-chunk usage, output) tokens: the server's /tokenize, a Hugging Face
    # tokenizer name or path (needs the tokenizers or transformers package), or none (lengths approximate).
    tokenizer: str = "server"
    timeouts: Timeouts = Timeouts()

    @field_validator("ladder")
    @classmethod
    def _ladder_positive(cls, ladder: list[float]) -> list[float]:
        if not ladder or len(ladder) > 1000 or any(not 0 < level <= MAX_LEVEL for level in ladder):
            raise ValueError(f"ladder must be a non-empty list of at most 1000 finite numbers > 0 and "
                             f"<= {MAX_LEVEL} (users or req/s)")
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
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class GatesSpec(Strict):
    """Pass/fail for nightly jobs: percentile SLOs per step, and regression against a saved baseline run."""

    ttft_p99_ms: float | None = Field(default=None, gt=0)
    tpot_p99_ms: float | None = Field(default=None, gt=0)
    # A run where most requests fail must not pass by default: 5% unless the scenario says otherwise (null: off).
    error_rate: float | None = Field(default=0.05, ge=0, le=1)
    max_regression_pct: float = Field(default=5.0, ge=0)
    baseline_run: str | None = None  # a name saved with `locust-llm baseline save`
    library: str = "baselines"  # where saved baselines live (relative to the working directory)


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
    # Where the file came from; relative paths in it are resolved against its folder.
    source: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _check_variants(self) -> "Scenario":
        bad = [name for name in self.variants if not valid_name(name)]
        if bad:
            raise ValueError(f"variant names must be plain names ({NAME_PATTERN}: letters, digits, '.', '_', '-'); "
                             f"found {', '.join(map(repr, bad))}")
        if self.baseline is not None and self.baseline not in self.variants:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants: {', '.join(self.variants)}")
        return self

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

    def tiny_model_dir(self) -> Path | None:
        tiny = self.server.tiny_model
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
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
    return f"{where}: {msg}; found {describe_value(error.get('input'))}"


def _validate_speculative(scenario: Scenario, path: Path) -> None:
    model = SPECULATIVE_MODELS.get(scenario.server.engine)
    for name, variant in scenario.variants.items():
        if variant.speculative is None:
            continue
        prefix = ("variants", name, "speculative")
        if model is None:
            raise ScenarioError(f"{path}: {'.'.join(prefix)}: engine 'external' is not launched by locust-llm, "
                                "so it takes no speculative settings; remove the key")
        try:
            model.model_validate(variant.speculative)
        except ValidationError as exc:
            lines = [_format_error(e, model, prefix) for e in exc.errors()]
            raise ScenarioError(f"{path}: invalid scenario\n  - " + "\n  - ".join(lines)) from None


MAX_YAML_VALUES = 100_000  # a scenario is a few hundred values; aliases must not expand into millions


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values the YAML becomes once its aliases are expanded (computed without expanding them)."""
    if id(node) not in memo:
        memo[id(node)] = 0  # a recursive alias counts once
        children = node.value if isinstance(node.value, list) else []
        total = 1
        for child in children:
            for part in (child if isinstance(child, tuple) else (child,)):
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
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and _expanded_size(node, {}) > MAX_YAML_VALUES:
            raise ScenarioError(f"{path}: the YAML expands to more than {MAX_YAML_VALUES} values (aliases of "
                                "aliases?); a scenario needs a few hundred")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping with keys name, server, variants; "
                            f"found {type(data).__name__}")
    try:
        scenario = Scenario.model_validate({**data, "source": path})
    except ValidationError as exc:
        lines = [_format_error(e, Scenario) for e in exc.errors()]
        raise ScenarioError(f"{path}: invalid scenario\n  - " + "\n  - ".join(lines)) from None
    _validate_speculative(scenario, path)
    return scenario
