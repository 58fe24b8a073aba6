"""``env.json``, typed: every condition a run's numbers depend on, as the runtime records it and the analysis reads it.

The runtime builds one ``RunEnv`` as the run goes (``runtime.experiment`` at the start, ``runtime.session`` per
server, the workload once it is built, the soak and clock sections, the servers' own request counts at the end),
by attribute, so that a misspelt field fails where it is set; ``RunDir.write_env`` writes it (``RunEnv.written``,
then redacted like every run file). ``rundir.load`` reads it back (``read_typed``) and the analysis and report read
its attributes. Every field is optional: older run directories, and ones written by hand, hold parts of it. The
schema is published as ``docs/env.schema.json`` (``locust-llm schema env``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..scenario.scale_out import ScaleOutPlan
from ..scenario.soak import SoakPlan
from .base import RunFileModel

__all__ = [
    "RecordedLoad",
    "RecordedScenario",
    "ClientEnv",
    "ClockEstimate",
    "ClocksEnv",
    "HostEnv",
    "ModelFileEnv",
    "RunEnv",
    "ServerEnv",
    "ServerRequests",
    "TraceEnv",
    "WorkloadEnv",
    "env_schema",
]


class _Part(RunFileModel):
    # env.json is built field by field as the run goes: a misspelt or mistyped assignment fails where it is made.
    model_config = ConfigDict(validate_assignment=True)


class ModelFileEnv(_Part):
    """A model file a launched server loaded, with its checksum and where it came from (``realmodel``)."""

    role: str
    """target or draft."""
    path: str
    """Where the server read it."""
    sha256: str
    """Its SHA-256, checked (the target against the checksum pinned for its package) before the server started."""
    source: str
    """Its provenance: package, version and licence, or how it was made from which file."""
    size_bytes: int | None = None
    """Its size on disk."""


class ServerEnv(_Part):
    """One variant's server (or one replica of it): launched by the run (``ServerProcess.describe``) or external.
    The fields of a launched server come first, then those of an external one, then what the run found out."""

    engine: str | None = None
    """The engine that served it (llamacpp, vllm, sglang, refserver); absent for an external server."""
    variant: str | None = None
    """The variant the server was launched for."""
    command: list[str] | None = None
    """The command line it was launched with (secret values masked)."""
    url: str | None = None
    """Its base URL."""
    version: str | None = None
    """What the engine said its version was."""
    served_model: str | None = None
    """The model name the server answers with (``/v1/models``)."""
    model: str | None = None
    """The model file or name it was launched with."""
    log: str | None = None
    """Its log file."""
    notes: dict[str, str] | None = None
    """What the launcher adjusted or assumed, by topic (flags derived from the scenario, ...)."""
    nice: int | None = None
    """The server process's priority (``nice``)."""
    model_files: list[ModelFileEnv] | None = None
    """The model files it loaded whose checksum and provenance are known (the real model, its truncated draft)."""
    owned_by: str | None = None
    """An external server: what ``/v1/models`` says serves it (llamacpp, vllm, sglang, ...)."""
    launched: bool | None = None
    """Whether the run launched it (false: an external server, ``--host``)."""
    local_pids: list[int] | None = None
    """An external server on this machine: the processes serving it (their CPU is the run's own)."""
    speculative: dict[str, Any] | None = None
    """The variant's speculative-decoding section as run (the scenario's ``SpeculativeSpec`` dump; null: none).
    Kept as written: an opaque copy of that scenario section, whose fields vary by method."""
    context_size: int | None = None
    """The context length the server reports (tokens); null when it does not say."""
    replicas: list[ServerEnv] | None = None
    """The scale-out steps' other servers of this variant, launched or external."""


class HostEnv(_Part):
    """The machine the master ran on (``rundir.facts.host_info``)."""

    hostname: str | None = None
    """Its host name."""
    platform: str | None = None
    """Operating system and kernel (``platform.platform()``)."""
    machine: str | None = None
    """CPU architecture."""
    processor: str | None = None
    """Processor name, where the platform says it."""
    cpu_count: int | None = None
    """Logical CPUs."""
    memory_total_gib: float | None = None
    """Memory (GiB)."""
    python: str | None = None
    """Python version."""
    gpu: list[dict[str, Any]] | str | None = None
    """The GPUs found (NVML: one entry per GPU), or a sentence saying why none was."""


class ClientEnv(_Part):
    """The load processes."""

    packages: dict[str, str | None] = Field(default_factory=dict)
    """Versions of the packages the measurement rests on (null: not installed)."""
    nice: int | None = None
    """The load processes' own priority, beside each launched server's (``servers.<variant>.nice``)."""


class ClockEstimate(_Part):
    """One worker's clock against the master's (``analysis.clocks.estimate``)."""

    offset_s: float
    """Its offset from the master's clock: that of the shortest exchange (s)."""
    uncertainty_s: float
    """Half that exchange's round trip (s)."""
    rtt_s: float
    """That exchange's round trip (s)."""
    drift_s: float
    """How far the offset moved over the run (s)."""
    exchanges: int
    """Exchanges made."""


class ClocksEnv(_Part):
    """The load processes' clocks, aligned to the master's (``runtime.clocksync``)."""

    bound_s: float
    """An offset less certain than this (s) is flagged (``clock_uncertain``)."""
    workers: dict[int, ClockEstimate]
    """Per worker index, its estimate."""


class StepRequests(_Part):
    """Requests of one kind sent while one step ran: its warm-up, its window, or the window's last streams arriving."""

    variant: str
    """The variant the step measured."""
    step: int
    """The step's number (``steps.json``)."""
    count: int
    """How many were sent meanwhile."""


class ServerRequests(_Part):
    """Requests the run sent to one server besides the measured streams, by purpose (``client.ledger``)."""

    server: str
    """The server's base URL."""
    purpose: str
    """Why they were sent (consistency, probes, quality, metrics, ...)."""
    method: str
    """HTTP method."""
    path: str
    """URL path."""
    count: int
    """How many."""
    while_running: list[StepRequests] = []
    """Those of them sent while a step ran, per step (none for token counting: it waits for a pause in the load;
    runs before this field: empty)."""


class TraceEnv(_Part):
    """A replayed trace (``Trace.describe``, then the replay's own fields), in the order the workload gives them."""

    file: str | None = None
    """The trace file."""
    format: str | None = None
    """Its format (``mooncake``, ...)."""
    rows: int | None = None
    """Rows read from the file."""
    records: int | None = None
    """Requests the trace holds inside its window."""
    outside_window: int | None = None
    """Rows left out: outside the replayed window."""
    skipped_rows: dict[str, int] | None = None
    """Rows left out, by reason."""
    span_s: float | None = None
    """The replayed span of the trace (s)."""
    rate_rps: float | None = None
    """The trace's own rate (requests/s)."""
    block_tokens: int | None = None
    """Tokens per hashed prompt block (a mooncake trace); null otherwise."""
    blocks: int | None = None
    """Prompt blocks in all."""
    shared_blocks: int | None = None
    """Prompt blocks repeated from earlier requests: prompt-cache hits on purpose."""
    input_tokens: int | None = None
    """Prompt tokens the trace asks for, in all."""
    output_tokens: int | None = None
    """Output tokens the trace asks for, in all."""
    context: int | None = None
    """The server's context length the replay fitted the requests to (tokens)."""
    over_context: int | None = None
    """Requests whose prompt and output do not fit the server's context (left out)."""
    exact: bool | None = None
    """Whether prompts were cut to the exact token counts (a tokenizer was at hand)."""
    prefix_tokens: int | None = None
    """Tokens put before every prompt (the unique marker)."""


class WorkloadEnv(_Part):
    """The prompts the run sent (``Workload.describe``, then ``cache_salt``), in the order the workload gives them."""

    source: str | None = None
    """Where the prompts came from: ``generated`` or a dataset file."""
    seed: int | None = None
    """The seed of the prompts and of which one each request gets."""
    exact: bool | None = None
    """Whether prompt lengths are exact token counts (a tokenizer was at hand)."""
    prompt_cache: str | None = None
    """``cold``, ``replayed`` or ``shared`` (``LoadSpec.prompt_cache``)."""
    unique_prefix_tokens: int | None = None
    """Tokens of the unique marker before every prompt (0: prompts replayed)."""
    shared_prefix: dict[str, int] | None = None
    """The shared prefix: its ``tokens`` and ``groups``; null without one."""
    skipped_conversations: int | None = None
    """Dataset conversations left out (no usable first turn)."""
    buckets: dict[str, dict[str, Any]] | None = None
    """Per prompt bucket: its share, pool size and token spans (``Workload.describe``: kept as described)."""
    contexts: dict[str, dict[str, Any]] | None = None
    """Per context-axis length: its pool and prompt tokens (kept as described)."""
    conversation: dict[str, Any] | None = None
    """Multi-turn conversations (``Conversations.describe``: its fields depend on the source, kept as described);
    absent for single requests."""
    trace: TraceEnv | None = None
    """A replayed trace; absent otherwise."""
    cache_salt: bool | None = None
    """Whether a cold run also salted the server's prompt cache (an engine that supports it)."""
    across_runs: str | None = None
    """``unique``: the run's markers (and salts) carry a nonce of its own, so no earlier run sent its prompts;
    ``repeated``: identical bytes every run (``load.same_prompts_every_run``); null: recorded before per-run markers
    (identical every run)."""


class _Recorded(BaseModel):
    """A typed reading of part of a copied scenario section: the fields the analysis and report read, each None
    where the run did not record it (``model_fields_set`` tells a field recorded as null from one never recorded);
    the other fields of the copy are not read, so not described here."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)


class RecordedTrace(_Recorded):
    format: str | None = None
    """The trace's format (mooncake, azure, ...)."""
    path: str | None = None
    """The trace file as the scenario named it."""


class RecordedSharedPrefix(_Recorded):
    tokens: int | None = None
    """Tokens of the prefix each group of prompts shares."""


class RecordedConversation(_Recorded):
    turns: int | None = None
    """Turns per conversation."""
    think_s: float | None = None
    """The user's think time between turns, s."""


class RecordedLoad(_Recorded):
    """The load section as run (``RunEnv.load``), read (``scenario.LoadSpec`` has every field's meaning)."""

    mode: str | None = None
    """closed or open loop."""
    api: str | None = None
    """completions or chat."""
    ladder: list[float] | None = None
    """The levels (users, or requests/s in an open loop)."""
    step_duration_s: float | None = None
    """Each step's steady window, s."""
    warmup_s: float | None = None
    """Each step's warm-up, s."""
    prompt_tokens: int | None = None
    """Generated prompts' length."""
    max_tokens: int | None = None
    """Output tokens asked for."""
    ignore_eos: bool | None = None
    """Whether the server was asked to ignore end-of-sequence."""
    temperature: float | None = None
    """Sampling temperature."""
    seed: int | None = None
    """The workload's seed."""
    arrival: str | None = None
    """Open loop: the arrival process."""
    burstiness: float | None = None
    """Open loop: gamma arrivals' shape."""
    max_inflight: int | None = None
    """Open loop: the most requests in flight."""
    tokenizer: str | None = None
    """What counted the tokens: ``server`` (its /tokenize), a tokenizer name or path, or ``none``."""
    think_time_s: float | None = None
    """A closed-loop user's wait between requests, s."""
    buckets: dict[str, Any] | None = None
    """Length buckets, as the scenario gave them."""
    dataset: str | None = None
    """The dataset file."""
    unique_prefix: bool | None = None
    """Whether every prompt began with a unique prefix (cold prompts)."""
    shared_prefix: RecordedSharedPrefix | None = None
    """Prompts sharing a prefix in groups."""
    timeouts: dict[str, float | None] | None = None
    """Request timeouts by name, s."""
    conversation: RecordedConversation | None = None
    """Multi-turn conversations."""
    trace: RecordedTrace | None = None
    """A replayed trace."""
    reasoning: dict[str, Any] | None = None
    """Reasoning streams (``scenario.ReasoningSpec``, which the analysis validates it with)."""
    positions: dict[str, Any] | None = None
    """Decode speed by position (``scenario.PositionsSpec``, which the analysis validates it with)."""
    contention_cores: float | None = None
    """Foreign CPU cores above which a step is contended."""
    min_requests: int | None = None
    """Completed requests a steady window needs."""
    min_output_tokens: int | None = None
    """Output tokens a steady window needs."""
    max_extend_s: float | None = None
    """The most a step may be extended, s."""


class RecordedServer(_Recorded):
    engine: str | None = None
    """The engine the scenario named."""
    model: str | None = None
    """The model the scenario named."""
    served_model_name: str | None = None
    """The name the server was to serve it under."""


class RecordedVariant(_Recorded):
    speculative: dict[str, Any] | None = None
    """The variant's speculative decoding, as the scenario gave it."""


class RecordedScenario(_Recorded):
    """The scenario as run (``RunEnv.scenario``), read (``scenario.Scenario`` has every field's meaning)."""

    name: str | None = None
    """The scenario's name."""
    server: RecordedServer | None = None
    """Its server section."""
    variants: dict[str, RecordedVariant | None] | None = None
    """Its variants."""
    load: RecordedLoad | None = None
    """Its load section (before command-line overrides)."""
    gates: dict[str, Any] | None = None
    """Its gates (read through ``analysis.gates.gates_of``)."""
    slo: dict[str, float | None] | None = None
    """Its SLOs by name."""
    sweeps: dict[str, dict[str, Any]] | None = None
    """Its sweeps (``analysis.schedule`` reads them)."""
    cost: dict[str, Any] | None = None
    """Its cost section (``scenario.CostSpec``, which the analysis validates it with)."""


class RunEnv(_Part):
    """``env.json``: the run's conditions. Fields are in the order the runtime sets them."""

    run_id: str | None = None
    """The run's name (its directory)."""
    scenario: dict[str, Any] = Field(default_factory=dict)
    """The scenario as run (``Scenario.model_dump(mode="json")``): a copy of the scenario document, kept as it was
    written (older and hand-written run directories hold only parts of it); read through ``recorded_scenario``."""
    scenario_file: str | None = None
    """The scenario file."""
    load: dict[str, Any] = Field(default_factory=dict)
    """The load as run (``LoadSpec.model_dump(mode="json")``, command-line overrides applied): a copy kept as it
    was written, like ``scenario``; read through ``recorded_load``."""
    gates: dict[str, Any] = Field(default_factory=dict)
    """The gates as run (``GatesSpec`` dump, command-line overrides applied); read through ``gates_of``."""
    variants: list[str] = Field(default_factory=list)
    """The variants planned, in run order."""
    baseline: str | None = None
    """The baseline variant."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Locust's parsed command line (secret values masked): Locust's own options, kept as they are."""
    external_url: str | None = None
    """``--host``: the external server measured (null: the run launched its servers)."""
    servers: dict[str, ServerEnv | None] = Field(default_factory=dict)
    """Per variant, its server (null: never started)."""
    host: HostEnv | None = None
    """The master's machine."""
    client: ClientEnv | None = None
    """The load processes."""
    seed: int | None = None
    """The run's seed."""
    scale_out: ScaleOutPlan | None = None
    """The scale-out plan (``ScaleOutPlan``); null: none."""
    checks_skipped: dict[str, str] = Field(default_factory=dict)
    """Checks the run did not make, and why."""
    clocks: ClocksEnv | None = None
    """The load processes' clocks (a distributed run); absent otherwise."""
    workload: WorkloadEnv | None = None
    """The prompts sent, described once the first server was checked."""
    soak: SoakPlan | None = None
    """The soak plan (``SoakPlan``); absent for a ladder run."""
    server_requests: list[ServerRequests] = Field(default_factory=list)
    """Requests sent to each server besides the measured streams."""
    server_seen: dict[str, list[str]] = Field(default_factory=dict)
    """Per server, the optional response fields it was seen to send (``cached_prompt_tokens``, ...)."""
    merged_from: list[str] | None = None
    """A merged analysis (``analysis.merge``): the runs merged; absent otherwise."""

    @property
    def recorded_load(self) -> RecordedLoad:
        """``load``, read typed."""
        return RecordedLoad.model_validate(self.load)

    @property
    def recorded_scenario(self) -> RecordedScenario:
        """``scenario``, read typed."""
        return RecordedScenario.model_validate(self.scenario)

    def server(self, variant: str) -> ServerEnv:
        """``variant``'s server, or an empty one (every field null) when it never started."""
        return self.servers.get(variant) or ServerEnv()

    def written(self) -> dict[str, Any]:
        """The document as ``env.json`` holds it: the fields that were set, in declaration order. A container
        filled in place (``env.servers[variant] = ...`` on the default) was never assigned, yet is written."""
        filled = {
            name: getattr(self, name)
            for name, field in type(self).model_fields.items()
            if name not in self.model_fields_set and getattr(self, name) != field.get_default(call_default_factory=True)
        }
        return self.model_copy(update=filled).model_dump(exclude_unset=True)


def env_schema() -> dict:
    """The JSON Schema of ``env.json`` (written to ``docs/env.schema.json``)."""
    return RunEnv.model_json_schema()
