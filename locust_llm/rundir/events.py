"""Run events, typed: what happened during a run that the summary, the verdict and the report must show (a server
that exited, records that went missing, a lost load process, a sweep that stopped climbing, ...).

The runtime builds one model per kind (``ServerExited(variant=..., log_tail=...)``: a misspelt field is refused
there, before anything is written) and ``RunDir.note`` stamps and appends it to ``steps.json``'s ``events``;
``rundir.load`` reads them back as ``RunEvent`` (``read_events``) and the analysis and report read their
attributes. Each event is written as it was made: its kind, its time, then its fields in the order they were given
(a field set later comes after), and nothing it was not given, so the files and ``summary.json`` keep the bytes of
the dicts they used to be. The schema is published as ``docs/events.schema.json`` (``locust-llm schema events``).

An event of a kind this release does not know (a newer or older release's) is kept as an ``OtherEvent`` with its
fields as written: the report lists it and the summary carries it, but no verdict rests on it (as before the
models). An event of a known kind that does not fit its model is refused, naming the file and the event.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    TypeAdapter,
    model_validator,
)

from .base import RunFileModel

__all__ = [
    "KNOWN",
    "ClientRefused",
    "ClockUncertain",
    "ConsistencySkipped",
    "ContextTooLong",
    "DrainTimeout",
    "FaultsNotInjected",
    "Interrupted",
    "OtherEvent",
    "ProbeServerFailed",
    "PrometheusUnavailable",
    "RecordsLost",
    "RecordsMissing",
    "RunEvent",
    "ScaleOutFailed",
    "ServerExited",
    "ServerPaused",
    "ServerRestartFailed",
    "ServerRestarted",
    "ServerStartFailed",
    "SweepStopped",
    "Unfinished",
    "UsageSuspect",
    "WorkerJoined",
    "WorkerLost",
    "events_schema",
    "parse_event",
]

Level = int | float  # a ladder level as the plan gave it: an integer stays one (the file's bytes)


class Event(RunFileModel):
    """What every run event has: its kind and when it happened."""

    kind: str
    """What happened (the model's name in snake case)."""
    t: float | None = Field(default_factory=time.time)
    """When it happened (s, master clock, epoch); null when unknown (a run killed before its first record)."""
    run_id: str | None = None
    """A merged report's: the run the event came from (set by the merge, never by the runtime)."""

    # The fields in the order they were given, then those set later: how the event is written.
    _keys: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> Any:
        kind = cls.model_fields["kind"].default
        if isinstance(data, dict) and "kind" not in data and isinstance(kind, str):
            # Made by the runtime: its kind and time come first, as the dicts of before had them.
            data = {"kind": kind, "t": data.get("t", time.time()), **data}
        event = handler(data)
        if isinstance(data, dict):
            event._keys = list(data)
        return event

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).model_fields and name not in self._keys:
            self._keys.append(name)
        super().__setattr__(name, value)

    def written(self) -> dict[str, Any]:
        """The event as ``steps.json`` and ``summary.json`` hold it: the fields it was given, in that order."""
        data = self.model_dump(exclude_unset=True)
        order = [k for k in self._keys if k in data] + [k for k in data if k not in self._keys]
        return {k: data[k] for k in order}

    def details(self) -> dict[str, Any]:
        """Its own fields as written (all but the kind and the time), for a line of text."""
        return {k: v for k, v in self.written().items() if k not in ("kind", "t")}

    def of_run(self, run_id: str) -> Event:
        """A copy that says which run it came from (a merged report)."""
        copy = self.model_copy(deep=True)
        copy._keys = list(self._keys)
        copy.run_id = run_id
        return copy


# -- servers ------------------------------------------------------------------------------------------------------
class ServerExited(Event):
    """A server locust-llm launched exited during the run."""

    kind: Literal["server_exited"] = "server_exited"
    """The kind of event."""
    variant: str
    """The variant whose server exited."""
    log_tail: str
    """The last lines of its log."""


class ServerStartFailed(Event):
    """A server could not be launched (or did not become ready); the variant was not measured."""

    kind: Literal["server_start_failed"] = "server_start_failed"
    """The kind of event."""
    variant: str
    """The variant whose server did not start."""
    error: str
    """Why."""
    during: Literal["probes"] | None = None
    """``probes``: while starting it for the probes after the ladder; absent: for the ladder itself."""


class ServerPaused(Event):
    """A fault injected on purpose: the server's process group was stopped (SIGSTOP), then continued."""

    kind: Literal["server_paused"] = "server_paused"
    """The kind of event."""
    variant: str
    """The variant whose server was paused."""
    step: int
    """The step it was paused in."""
    level: Level
    """That step's level."""
    t_start: float
    """When the pause began (s, master clock)."""
    t_end: float
    """When the server was continued (s, master clock)."""
    pause_s: float
    """The planned length of the pause (s)."""
    pid: int
    """The server's process id."""


class ServerRestarted(Event):
    """A fault injected on purpose: the server was stopped and started again."""

    kind: Literal["server_restarted"] = "server_restarted"
    """The kind of event."""
    variant: str
    """The variant whose server was restarted."""
    step: int
    """The step it was restarted in."""
    level: Level
    """That step's level."""
    t_start: float
    """When it was stopped (s, master clock)."""
    t_end: float
    """When the new server was ready (s, master clock)."""
    down_s: float
    """How long it was down (s)."""
    old_url: str
    """The server's base URL before."""
    new_url: str
    """Its base URL after."""
    same_port: bool
    """Whether it came back on the same port."""


class ServerRestartFailed(Event):
    """A restart injected on purpose: the server did not come back; the run ended."""

    kind: Literal["server_restart_failed"] = "server_restart_failed"
    """The kind of event."""
    variant: str
    """The variant whose server did not come back."""
    step: int
    """The step of the restart."""
    error: str
    """Why."""


class FaultsNotInjected(Event):
    """The scenario's faults were not injected (the fault level is not a ladder level, or the server was not
    launched by locust-llm)."""

    kind: Literal["faults_not_injected"] = "faults_not_injected"
    """The kind of event."""
    fault_level: Level | None = None
    """The scenario's ``probes.fault_level``, when it is not a ladder level."""
    ladder: list[Level] | None = None
    """The ladder's levels, when the fault level is not one of them."""
    faults: list[Literal["pause", "restart"]] | None = None
    """The faults not injected, when the server was not launched by locust-llm."""
    variant: str | None = None
    """The variant whose server was not launched by locust-llm."""
    reason: str
    """Why they were not injected."""


class ProbeServerFailed(Event):
    """A probe after the ladder left the server unable to answer."""

    kind: Literal["probe_server_failed"] = "probe_server_failed"
    """The kind of event."""
    variant: str
    """The variant probed."""
    probe: str
    """The probe (``probes.py``'s name for it)."""
    reason: str | None
    """What the probe saw."""
    log_tail: str | None
    """The last lines of the server's log; null when locust-llm did not launch it (no log)."""


class ScaleOutFailed(Event):
    """The scale-out could not start its further servers, or one exited; it stopped there."""

    kind: Literal["scale_out_failed"] = "scale_out_failed"
    """The kind of event."""
    variant: str
    """The variant scaled out."""
    error: str
    """Why."""
    log_tails: list[str] | None = None
    """The last lines of the logs of the servers that exited; absent when none had started."""


class PrometheusUnavailable(Event):
    """The Prometheus server named in the scenario could not be reached: its metrics are missing."""

    kind: Literal["prometheus_unavailable"] = "prometheus_unavailable"
    """The kind of event."""
    error: str
    """Why."""


class ConsistencySkipped(Event):
    """The greedy-consistency check could not be made for a variant."""

    kind: Literal["consistency_skipped"] = "consistency_skipped"
    """The kind of event."""
    variant: str
    """The variant."""
    error: str
    """Why."""


class ContextTooLong(Event):
    """A context-axis step asks for prompts longer than the server's context holds."""

    kind: Literal["context_too_long"] = "context_too_long"
    """The kind of event."""
    variant: str
    """The variant."""
    context: int
    """The prompt length asked for (tokens)."""
    max_tokens: int
    """The output tokens asked for on top."""
    server_context: int
    """The server's context size (tokens)."""


# -- the run and its load processes --------------------------------------------------------------------------------
class Interrupted(Event):
    """The run was interrupted (SIGTERM, Ctrl-C): the figures cover what was measured until then."""

    kind: Literal["interrupted"] = "interrupted"
    """The kind of event."""
    signal: str
    """The signal's name."""
    step: int
    """The step it arrived in (-1: before the first)."""
    variant: str
    """The variant measured then (empty before the first step)."""
    cut: str | None = None
    """The window it cut short, in words (``steady window of step 3 cut at 5.6 s of 10 s``); null between windows
    or in runs that did not record it."""


class Unfinished(Event):
    """Made by the loader, never written: the run left steps open (it is still running, or was killed), and they
    end at its last record."""

    kind: Literal["unfinished"] = "unfinished"
    """The kind of event."""
    variant: str
    """The variant of the last open step."""
    step: int
    """The last open step."""
    steps: list[int]
    """Every open step."""


class SweepStopped(Event):
    """A sweep stopped climbing the ladder: every setting was clearly slower than the baseline at a level."""

    kind: Literal["sweep_stopped"] = "sweep_stopped"
    """The kind of event."""
    sweep: str
    """The sweep's name."""
    level: Level
    """The level it stopped after."""
    context: int | None
    """The prompt length of a context-axis step; null for the ladder's own workload."""
    speedups: list[float | None]
    """Each setting's live output tok/s ratio to the baseline there, in the sweep's value order (null: none)."""


class ClientRefused(Event):
    """A load process could not build a request (a missing file, a bad template), so none was sent; the run
    stopped."""

    kind: Literal["client_refused"] = "client_refused"
    """The kind of event."""
    worker: int
    """The load process (worker index)."""
    message: str
    """What it said."""


class WorkerLost(Event):
    """A load process stopped answering: the level of its step was not held."""

    kind: Literal["worker_lost"] = "worker_lost"
    """The kind of event."""
    worker: int
    """The load process (worker index)."""
    client_id: str
    """Its Locust client id."""
    variant: str
    """The variant measured then."""
    step: int
    """The step it was lost in."""
    level: Level
    """That step's level."""
    records_sent: int
    """Records it said it had sent."""
    records_received: int
    """Records the master had received from it."""
    requests_lost: int
    """Its requests in flight or not shipped, lost (updated at the end: records that came back late are rows)."""
    stopped: bool
    """Whether the run stopped for it (``load.on_worker_loss: stop``)."""


class WorkerJoined(Event):
    """A load process joined during the run and got the load again."""

    kind: Literal["worker_joined"] = "worker_joined"
    """The kind of event."""
    worker: int
    """The load process (worker index)."""
    client_id: str
    """Its Locust client id."""
    variant: str
    """The variant measured then."""
    step: int
    """The step it joined in."""


class ClockUncertain(Event):
    """A load process's clock offset is less certain than the bound: its requests near window edges may be
    mislabelled."""

    kind: Literal["clock_uncertain"] = "clock_uncertain"
    """The kind of event."""
    worker: int
    """The load process (worker index)."""
    offset_s: float
    """Its clock's estimated offset from the master's (s)."""
    uncertainty_s: float
    """The estimate's uncertainty (s)."""
    bound_s: float
    """The uncertainty allowed (s)."""


# -- records -------------------------------------------------------------------------------------------------------
class RecordsMissing(Event):
    """Load processes said they had sent records the master never received."""

    kind: Literal["records_missing"] = "records_missing"
    """The kind of event."""
    missing: dict[str, int]
    """Per worker index, the records missing."""


class DrainTimeout(Event):
    """Requests still in flight when the drain's time ran out."""

    kind: Literal["drain_timeout"] = "drain_timeout"
    """The kind of event."""
    missing: dict[str, int]
    """Per worker index, the records not received."""


class RecordsLost(Event):
    """Records that could not be written (their values did not fit the schema)."""

    kind: Literal["records_lost"] = "records_lost"
    """The kind of event."""
    lost: int
    """How many."""
    reasons: list[str]
    """Why (the first ten)."""


class UsageSuspect(Event):
    """Requests whose usage a tokenizer found suspect after they were sent: the loader makes them
    ``suspect_usage`` failures (their rows keep what the server said)."""

    kind: Literal["usage_suspect"] = "usage_suspect"
    """The kind of event."""
    requests: dict[str, str]
    """Request id -> why."""


class OtherEvent(Event):
    """An event of a kind this release does not know (another release's): its fields kept as written."""

    model_config = ConfigDict(extra="allow")

    t: int | float | None = None
    """When it happened (s, master clock, epoch), as written (an integer stays one); null when unknown."""


def _known_or_other(data: Any) -> str:
    kind = data.get("kind") if isinstance(data, dict) else getattr(data, "kind", None)
    return "known" if kind in _KINDS else "other"


KnownEvent = Annotated[
    ServerExited
    | ServerStartFailed
    | ServerPaused
    | ServerRestarted
    | ServerRestartFailed
    | FaultsNotInjected
    | ProbeServerFailed
    | ScaleOutFailed
    | PrometheusUnavailable
    | ConsistencySkipped
    | ContextTooLong
    | Interrupted
    | Unfinished
    | SweepStopped
    | ClientRefused
    | WorkerLost
    | WorkerJoined
    | ClockUncertain
    | RecordsMissing
    | DrainTimeout
    | RecordsLost
    | UsageSuspect,
    Field(discriminator="kind"),
]
KNOWN: tuple[type[Event], ...] = get_args(get_args(KnownEvent)[0])  # every kind this release knows
_KINDS = {model.model_fields["kind"].default for model in KNOWN}
RunEvent = Annotated[
    Annotated[KnownEvent, Tag("known")] | Annotated[OtherEvent, Tag("other")],
    Discriminator(_known_or_other),
]
"""A run event as read back: its kind's model, or ``OtherEvent`` for a kind this release does not know."""

_EVENT: TypeAdapter[Event] = TypeAdapter(RunEvent)


def parse_event(data: Any) -> Event:
    """One event as read back: its kind's model, or ``OtherEvent``; raises ``ValidationError`` when an event of a
    known kind does not fit it."""
    return _EVENT.validate_python(data)


def events_schema() -> dict:
    """The JSON Schema of one run event of ``steps.json``'s ``events`` (written to ``docs/events.schema.json``)."""
    return TypeAdapter(KnownEvent).json_schema()
