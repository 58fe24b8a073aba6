"""``TelemetryPoller``: background greenlets on the master that poll what the server knows -> telemetry.parquet.

One greenlet per source (``sources``), each polling every ``interval_s`` on its own schedule (a slow source
never delays another, and none of this runs in a stream's code path):

* ``scrape``: the server's own ``/metrics`` (the default), parsed with prometheus_client's parser and mapped
  to canonical names (``maps``);
* ``prometheus``: instant queries to a Prometheus (prometheus-api-client) when ``prometheus_url`` is given;
  at ``detach`` a raw range query fills in every scrape the instant queries did not see;
* ``dcgm``: a DCGM exporter's page scraped directly, when ``dcgm_url`` is given;
* ``nvml``: the GPUs through nvidia-ml-py, when it imports and finds a GPU;
* ``process``: the server process's CPU and resident memory (psutil), when its pid is known. Without a GPU
  this is the hardware figure (said once, in the log and in ``telemetry.json``).

Rows: ``t`` (run clock, ``records.now()``, the middle of the poll; a Prometheus sample keeps its scrape time, a
Prometheus being a scraper with a clock of its own; a ``/metrics`` page's exposition timestamps are ignored),
``variant``,
``source``, ``metric`` (canonical), ``labels`` (JSON), ``value`` (canonical unit). Part files are flushed
every ``flush_interval_s`` into ``telemetry.parts/`` and merged into ``telemetry.parquet`` by ``close()``.

Failures (unreachable, slower than the timeout, garbage): one warning per variant and source, a gap in
``telemetry.json`` (``start`` = last good sample, ``end`` = next good sample or detach), the run goes on.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import gevent
import pyarrow as pa

from ..fmt import shown
from ..records import now
from ..rundir import PartWriter, layout
from ..rundir.telemetry_meta import SourceRecord, TelemetryAttachment, TelemetryGap, TelemetryMeta, TelemetryNote
from .maps import CANONICAL, map_for
from .sources import NvmlSource, ProcessSource, PrometheusSource, Row, ScrapeSource, SourceError, probe_nvml

log = logging.getLogger(__name__)

__all__ = ["TELEMETRY_SCHEMA", "TelemetryPoller"]

# What the web UI's live view shows; counters are differenced there, never here.
LIVE_METRICS = ("spec_draft_tokens", "spec_accepted_tokens", "kv_cache_usage", "spec_accept_rate_gauge")
LIVE_KEEP = 120

TELEMETRY_SCHEMA = pa.schema(
    [
        ("t", pa.float64()),
        ("variant", pa.string()),
        ("source", pa.string()),
        ("metric", pa.string()),
        ("labels", pa.string()),
        ("value", pa.float64()),
    ]
)


@dataclass
class SourceState:
    source: object
    polls: int = 0
    failures: int = 0
    samples: int = 0  # rows recorded
    last_ok: float | None = None
    gap: TelemetryGap | None = None
    warned: bool = False
    greenlet: gevent.Greenlet | None = None


@dataclass
class Attachment:
    variant: str
    engine: str
    base_url: str
    t_attach: float
    server_pid: int | None = None
    prometheus_url: str | None = None
    t_detach: float | None = None
    states: list[SourceState] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def describe(self) -> TelemetryAttachment:
        return TelemetryAttachment(
            variant=self.variant,
            engine=self.engine,
            base_url=self.base_url,
            server_pid=self.server_pid,
            prometheus_url=self.prometheus_url,
            t_attach=self.t_attach,
            t_detach=self.t_detach,
            sources=[
                SourceRecord.model_validate(
                    {**s.source.describe, "polls": s.polls, "failures": s.failures, "samples": s.samples}
                )
                for s in self.states
            ],
            errors=list(self.errors),
        )


class TelemetryPoller:
    """Polls the attached variant's server (one at a time) until ``detach``; ``close`` writes the files."""

    def __init__(
        self,
        run_dir: str | Path,
        interval_s: float = 1.0,
        timeout_s: float | None = None,
        flush_interval_s: float = 2.0,
        nvml_module=None,
    ):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s) if timeout_s is not None else max(0.2, 0.9 * self.interval_s)
        self.flush_interval_s = flush_interval_s
        self.parts = PartWriter(
            self.run_dir,
            layout.TELEMETRY,
            layout.TELEMETRY_PARTS,
            TELEMETRY_SCHEMA,
            sort_by=[("variant", "ascending"), ("t", "ascending")],
        )
        self.attachments: list[Attachment] = []
        self.current: Attachment | None = None
        self.gaps: list[TelemetryGap] = []
        self.notes: list[TelemetryNote] = []
        self.closed = False
        self.live: dict[tuple[str, str], deque] = {}  # (variant, metric) -> recent (t, value)
        self.nvml, self.gpu_description = probe_nvml(nvml_module)
        if self.nvml is None:
            self._note(
                "no_gpu",
                f"no GPU telemetry: {self.gpu_description}; recording the server process's "
                "CPU and resident memory instead",
            )
            log.info(
                "telemetry: no GPU (%s); recording the server process's CPU and resident memory instead",
                self.gpu_description,
            )
        self._flusher = gevent.spawn(self._flush_forever)
        self._write_meta()

    # -- public API -------------------------------------------------------------------------
    def attach(
        self,
        variant: str,
        engine: str,
        base_url: str,
        server_pid: int | None = None,
        prometheus_url: str | None = None,
        dcgm_url: str | None = None,
        prometheus_selector: str | None = None,
    ) -> None:
        """Start polling ``variant``'s server (call once it is healthy). Detaches a previous one first."""
        if self.closed:
            raise RuntimeError("the telemetry poller is closed")
        if self.current is not None:
            self.detach()
        att = Attachment(
            variant=variant,
            engine=engine,
            base_url=base_url.rstrip("/"),
            t_attach=now(),
            server_pid=server_pid,
            prometheus_url=prometheus_url,
        )
        sources: list[object] = []
        engine_map = map_for(engine)
        if prometheus_url:
            try:
                sources.append(
                    PrometheusSource(
                        prometheus_url, engine_map, prometheus_selector, self.timeout_s, dcgm_map=map_for("dcgm")
                    )
                )
            except Exception as exc:  # noqa: BLE001  (prometheus-api-client missing or bad URL)
                att.errors.append(f"Prometheus source not available ({exc}); scraping /metrics directly")
                log.warning("telemetry: %s", att.errors[-1])
                prometheus_url = None
        if not prometheus_url:
            sources.append(ScrapeSource("scrape", f"{att.base_url}/metrics", engine_map, self.timeout_s, self._note))
        if dcgm_url:
            url = dcgm_url if dcgm_url.rstrip("/").endswith("/metrics") else dcgm_url.rstrip("/") + "/metrics"
            sources.append(ScrapeSource("dcgm", url, map_for("dcgm"), self.timeout_s, self._note))
        if self.nvml is not None:
            try:
                sources.append(NvmlSource(self.nvml))
            except Exception as exc:  # noqa: BLE001
                att.errors.append(f"NVML source failed: {exc}")
        if server_pid is not None:
            try:
                sources.append(ProcessSource(server_pid))
            except SourceError as exc:
                att.errors.append(str(exc))
        att.states = [SourceState(source) for source in sources]
        self.attachments.append(att)
        self.current = att
        for state in att.states:
            state.greenlet = gevent.spawn(self._poll_forever, att, state)
        self._write_meta()

    def detach(self) -> None:
        """Stop polling the current server after one final sample of each source (call before it stops)."""
        att, self.current = self.current, None
        if att is None:
            return
        for state in att.states:
            if state.greenlet is not None:
                state.greenlet.kill(block=True)
                state.greenlet = None
        for state in att.states:
            self._poll_once(att, state)
            if isinstance(state.source, PrometheusSource):
                try:
                    self._append(att, state, now(), state.source.backfill(att.t_attach, now()))
                except SourceError as exc:
                    att.errors.append(f"Prometheus backfill failed: {exc}")
        att.t_detach = now()
        for state in att.states:
            if state.gap is not None:
                self._close_gap(state, att.t_detach, recovered=False)
            try:
                state.source.close()
            except Exception as exc:  # noqa: BLE001
                log.debug("telemetry: closing %s: %s", state.source.name, exc)
        self._write_meta()

    def close(self) -> Path:
        """Detach, flush, merge the parts into ``telemetry.parquet``; idempotent. Returns its path."""
        if not self.closed:
            self.detach()
            self._flusher.kill(block=True)
            self.closed = True
            self.parts.close()
            self._write_meta()
        return self.parts.target

    # -- polling ----------------------------------------------------------------------------
    def _poll_forever(self, att: Attachment, state: SourceState) -> None:
        next_at = time.monotonic()
        while True:
            self._poll_once(att, state)
            next_at += self.interval_s
            late = time.monotonic() - next_at
            if late > 0:  # skip the ticks a slow poll overran, keep the grid
                next_at += math.ceil(late / self.interval_s) * self.interval_s
            gevent.sleep(max(0.0, next_at - time.monotonic()))

    def _poll_once(self, att: Attachment, state: SourceState) -> None:
        t0 = now()
        try:
            with gevent.Timeout(self.timeout_s + 0.5, SourceError(f"no answer within {self.timeout_s + 0.5:.1f} s")):
                rows = state.source.poll()
        except Exception as exc:  # noqa: BLE001  (GreenletExit is not an Exception: kill still works)
            state.polls += 1  # counted once it ended: a poll cut by the detach is neither an answer nor a failure
            self._failed(att, state, t0, exc)
            return
        state.polls += 1
        state.samples += len(rows)
        t = (t0 + now()) / 2.0
        if state.gap is not None:
            self._close_gap(state, t, recovered=True)
            log.info("telemetry: %s/%s answers again", att.variant, state.source.name)
        state.last_ok = t
        self._append(att, state, t, rows)
        self._keep_live(att.variant, t, rows)

    def _keep_live(self, variant: str, t: float, rows: list[Row]) -> None:
        """The few figures the web UI shows while the run goes on, one combined value per poll."""
        polled: dict[str, list[float]] = defaultdict(list)
        for _ts, metric, _labels, value in rows:
            if metric in LIVE_METRICS:
                polled[metric].append(value)
        for metric, values in polled.items():
            value = sum(values) if CANONICAL[metric].combine == "sum" else sum(values) / len(values)
            self.live.setdefault((variant, metric), deque(maxlen=LIVE_KEEP)).append((t, value))

    def live_figures(self, variant: str, window_s: float = 10.0) -> dict:
        """Server-side acceptance (accepted / drafted tokens over about the last ``window_s``) and KV-cache use
        (the last reading) of ``variant``; None where the server does not export them."""

        def series(metric: str) -> deque:
            return self.live.get((variant, metric)) or deque()

        def delta(metric: str) -> float | None:
            points = series(metric)
            if len(points) < 2:
                return None
            t_last, v_last = points[-1]
            earlier = [p for p in points if p[0] <= t_last - window_s] or [points[0]]
            return v_last - earlier[-1][1]

        drafted, accepted = delta("spec_draft_tokens"), delta("spec_accepted_tokens")
        kv, gauge = series("kv_cache_usage"), series("spec_accept_rate_gauge")
        # Counters that cannot both be true (more accepted than drafted, not finite) show nothing, never a rate.
        possible = drafted is not None and accepted is not None and math.isfinite(drafted) and 0 <= accepted <= drafted
        return {
            "acceptance": accepted / drafted if possible and drafted else None,
            "acceptance_gauge": gauge[-1][1] if gauge else None,
            "kv_cache_usage": kv[-1][1] if kv else None,
        }

    def _append(self, att: Attachment, state: SourceState, t: float, rows: list[Row]) -> None:
        name = state.source.name
        self.parts.add(
            [
                {
                    "t": ts if ts is not None else t,
                    "variant": att.variant,
                    "source": name,
                    "metric": metric,
                    "labels": labels,
                    "value": value,
                }
                for ts, metric, labels, value in rows
            ]
        )

    def _failed(self, att: Attachment, state: SourceState, t: float, exc: BaseException) -> None:
        state.failures += 1
        # A server's text (an error page, a metric name) is escaped before it reaches a log line or telemetry.json.
        message = shown(str(exc) if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}", 400)
        if not state.warned:
            state.warned = True
            log.warning(
                "telemetry: %s/%s failed (%s); recording a gap, the load test continues",
                att.variant,
                state.source.name,
                message,
            )
        else:
            log.debug("telemetry: %s/%s still failing: %s", att.variant, state.source.name, message)
        if state.gap is None:
            state.gap = TelemetryGap(
                variant=att.variant,
                source=state.source.name,
                start=state.last_ok if state.last_ok is not None else att.t_attach,
                first_failure=t,
                end=None,
                failures=0,
                error=message,
                recovered=None,
            )
            self.gaps.append(state.gap)
            self._write_meta()
        state.gap.failures += 1
        state.gap.last_error = message  # written once set (after ``recovered``), as the dicts of before had it

    def _close_gap(self, state: SourceState, t: float, recovered: bool) -> None:
        gap, state.gap = state.gap, None
        gap.end = t
        gap.recovered = recovered
        self._write_meta()

    # -- files ------------------------------------------------------------------------------
    def _flush_forever(self) -> None:
        while True:
            gevent.sleep(self.flush_interval_s)
            self.flush()

    def flush(self) -> None:
        self.parts.flush()

    def _note(self, kind: str, message: str) -> None:
        self.notes.append(TelemetryNote(kind=kind, t=now(), message=message))

    def meta(self) -> TelemetryMeta:
        return TelemetryMeta(
            interval_s=self.interval_s,
            timeout_s=self.timeout_s,
            gpu=self.gpu_description,
            gpu_available=self.nvml is not None,
            attachments=[a.describe() for a in self.attachments],
            gaps=self.gaps,
            notes=self.notes,
            rows_written=self.parts.rows_written,
            rows_lost=self.parts.rows_lost,
        )

    def _write_meta(self) -> None:
        # While the run goes a full disk must not end it (this runs in the ladder's program): written again at the
        # next attach, detach or close.
        try:
            layout.write_json(self.run_dir / layout.TELEMETRY_META, self.meta().written())
        except OSError as exc:
            log.warning("could not write %s (%s); written again later", layout.TELEMETRY_META, exc.strerror or exc)
