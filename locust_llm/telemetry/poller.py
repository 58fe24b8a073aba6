"""``TelemetryPoller``: background greenlets on the master that poll what the server knows -> telemetry.parquet.

One greenlet per source, each polling every ``interval_s`` on its own schedule (a slow source never delays
another, and none of this runs in a stream's code path):

* ``scrape``: the server's own ``/metrics`` (the default), parsed with prometheus_client's parser and mapped
  to canonical names (``maps``);
* ``prometheus``: instant queries to a Prometheus (prometheus-api-client) when ``prometheus_url`` is given;
  at ``detach`` a raw range query fills in every scrape the instant queries did not see;
* ``dcgm``: a DCGM exporter's page scraped directly, when ``dcgm_url`` is given;
* ``nvml``: the GPUs through nvidia-ml-py, when it imports and finds a GPU;
* ``process``: the server process's CPU and resident memory (psutil), when its pid is known. Without a GPU
  this is the hardware figure (said once, in the log and in ``telemetry.json``).

Rows: ``t`` (run clock, ``records.now()``; a Prometheus sample keeps its scrape time), ``variant``,
``source``, ``metric`` (canonical), ``labels`` (JSON), ``value`` (canonical unit). Part files are flushed
every ``flush_interval_s`` into ``telemetry.parts/`` and merged into ``telemetry.parquet`` by ``close()``.

Failures (unreachable, slower than the timeout, garbage): one warning per variant and source, a gap in
``telemetry.json`` (``start`` = last good sample, ``end`` = next good sample or detach), the run goes on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import gevent
import locust  # noqa: F401  (gevent must patch sockets before requests is imported)
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import requests

from ..records import now
from .maps import MetricMap, Reading, map_for, normalise_nvml
from .parse import MetricsParseError, Sample, parse_text

log = logging.getLogger(__name__)

TELEMETRY_FILE = "telemetry.parquet"
META_FILE = "telemetry.json"
PARTS_DIR = "telemetry.parts"

SCHEMA = pa.schema([("t", pa.float64()), ("variant", pa.string()), ("source", pa.string()),
                    ("metric", pa.string()), ("labels", pa.string()), ("value", pa.float64())])


class SourceError(RuntimeError):
    """A poll that produced no data: the reason goes into the gap record."""


# -- sources ------------------------------------------------------------------------------------
Row = tuple  # (t or None, metric, labels_json, value)


def _rows(readings: list[Reading]) -> list[Row]:
    return [(r.timestamp, r.metric, r.labels_json(), float(r.value)) for r in readings]


class ScrapeSource:
    """GET a Prometheus text page and map it."""

    def __init__(self, name: str, url: str, metric_map: MetricMap, timeout_s: float):
        self.name = name
        self.url = url
        self.map = metric_map
        self.timeout_s = timeout_s
        self.session = requests.Session()
        self.describe = {"source": name, "url": url, "map": metric_map.name}

    def poll(self) -> list[Row]:
        try:
            response = self.session.get(self.url, timeout=(self.timeout_s, self.timeout_s))
        except requests.RequestException as exc:
            raise SourceError(f"{self.url} unreachable: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise SourceError(f"{self.url} answered HTTP {response.status_code}")
        try:
            samples = parse_text(response.content, wanted=self.map.wants)
        except MetricsParseError as exc:
            raise SourceError(f"{self.url}: {exc}") from None
        return _rows(self.map.normalise(samples))

    def close(self) -> None:
        self.session.close()


class PrometheusSource:
    """Instant queries for every name the maps know; sample times are Prometheus's scrape times."""

    name = "prometheus"

    def __init__(self, url: str, engine_map: MetricMap, selector: str | None, timeout_s: float,
                 dcgm_map: MetricMap | None = None, dcgm_selector: str | None = None):
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        # No retries with back-off: a failed poll is a gap, the next poll comes a second later.
        self.client = PrometheusConnect(url=self.url, disable_ssl=True, retry=Retry(total=0), timeout=timeout_s)
        self.timeout_s = timeout_s
        self.queries: list[tuple[str, MetricMap, bool]] = [(self._selector(engine_map, selector), engine_map, True)]
        if dcgm_map is not None:
            self.queries.append((self._selector(dcgm_map, dcgm_selector), dcgm_map, False))
        self.seen: dict[tuple[str, str], set[float]] = {}
        self.describe = {"source": self.name, "url": self.url, "queries": [q for q, _, _ in self.queries]}

    @staticmethod
    def _selector(metric_map: MetricMap, extra: str | None) -> str:
        matchers = [f'__name__=~"{metric_map.prometheus_name_regex()}"']
        if extra:
            matchers.append(extra.strip().strip("{}"))
        return "{" + ",".join(matchers) + "}"

    def _query(self, query: str, params: dict | None = None) -> list[dict]:
        try:
            return self.client.custom_query(query, params=params, timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001  (requests errors, PrometheusApiClientException, bad JSON)
            raise SourceError(f"Prometheus {self.url} query failed: {type(exc).__name__}: {exc}") from None

    def _new_rows(self, metric_map: MetricMap, series: list[tuple[dict, float, float]]) -> list[Row]:
        samples = []
        for labels, ts, value in series:
            name = labels.get("__name__", "")
            samples.append(Sample(name=name, value=value, labels={k: v for k, v in labels.items() if k != "__name__"},
                                  timestamp=ts))
        rows = []
        for reading in metric_map.normalise(samples):
            key = (reading.metric, reading.labels_json())
            seen = self.seen.setdefault(key, set())
            if reading.timestamp in seen:
                continue
            seen.add(reading.timestamp)
            rows.append((reading.timestamp, reading.metric, key[1], float(reading.value)))
        return rows

    def poll(self) -> list[Row]:
        rows = []
        for query, metric_map, required in self.queries:
            result = self._query(query)
            if not result and required:
                raise SourceError(f"Prometheus {self.url} has no current sample for {query[:200]} "
                                  "(target down or not scraped yet)")
            series = []
            for item in result:
                ts, value = item.get("value", (None, None))
                series.append((item.get("metric", {}), float(ts), _float(value)))
            rows.extend(self._new_rows(metric_map, series))
        return rows

    def backfill(self, start: float, end: float) -> list[Row]:
        """Every raw sample scraped in [start, end] (a range selector, evaluated at ``end``)."""
        seconds = max(1, math.ceil(end - start) + 1)
        rows = []
        for query, metric_map, _required in self.queries:
            result = self._query(f"{query}[{seconds}s]", params={"time": f"{end:.3f}"})
            series = []
            for item in result:
                for ts, value in item.get("values", []):
                    series.append((item.get("metric", {}), float(ts), _float(value)))
            rows.extend(self._new_rows(metric_map, series))
        return rows

    def close(self) -> None:
        self.client.close()


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


MIN_CPU_INTERVAL_S = 0.25


class ProcessSource:
    """CPU (cores busy since the last poll) and resident memory of a process and its children."""

    name = "process"

    def __init__(self, pid: int):
        self.pid = pid
        self.describe = {"source": self.name, "pid": pid}
        try:
            self.process = psutil.Process(pid)
        except psutil.Error as exc:
            raise SourceError(f"server process {pid}: {exc}") from None
        self._last: tuple[float, float] | None = None
        self._cpu_seen: dict[int, float] = {}
        self._prime()

    def _procs(self) -> list[psutil.Process]:
        procs = [self.process]
        try:
            procs.extend(self.process.children(recursive=True))
        except psutil.Error:
            pass
        return procs

    def _cpu_total(self, procs: list[psutil.Process]) -> float:
        # Summed per pid, so a child that exits between polls does not make the total run backwards.
        for proc in procs:
            try:
                times = proc.cpu_times()
                self._cpu_seen[proc.pid] = times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                pass
        return sum(self._cpu_seen.values())

    def _prime(self) -> None:
        self._last = (time.monotonic(), self._cpu_total(self._procs()))

    def poll(self) -> list[Row]:
        if not self.process.is_running():
            raise SourceError(f"server process {self.pid} is not running")
        procs = self._procs()
        rss = 0
        try:
            rss = self.process.memory_info().rss
        except psutil.Error as exc:
            raise SourceError(f"server process {self.pid}: {exc}") from None
        for child in procs[1:]:
            try:
                rss += child.memory_info().rss
            except psutil.Error:
                pass
        wall, cpu = time.monotonic(), self._cpu_total(procs)
        rows: list[Row] = [(None, "process_rss_mib", "{}", rss / 2**20)]
        # CPU times tick in 10 ms steps: over a shorter wall interval the quotient is noise, so wait.
        if self._last is not None and wall - self._last[0] >= MIN_CPU_INTERVAL_S:
            rows.append((None, "process_cpu_cores", "{}", max(0.0, (cpu - self._last[1]) / (wall - self._last[0]))))
            self._last = (wall, cpu)
        return rows

    def close(self) -> None:
        pass


def probe_nvml(module=None) -> tuple[object | None, str]:
    """``(pynvml, description)`` when nvidia-ml-py imports and sees at least one GPU, else ``(None, why)``."""
    if module is None:
        try:
            import pynvml as module  # nvidia-ml-py, optional
        except ImportError:
            return None, "nvidia-ml-py is not installed"
    try:
        module.nvmlInit()
    except Exception as exc:  # noqa: BLE001  (NVMLError_LibraryNotFound, DriverNotLoaded, ...)
        return None, f"NVML unavailable ({exc})"
    try:
        count = module.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001
        return None, f"NVML unavailable ({exc})"
    if count < 1:
        return None, "NVML sees no GPU"
    return module, f"{count} GPU(s) via NVML"


class NvmlSource:
    """Every GPU through NVML, in canonical units (bytes -> MiB, mW -> W, percent -> ratio)."""

    name = "nvml"

    def __init__(self, module):
        self.nvml = module
        self.devices = []
        for index in range(module.nvmlDeviceGetCount()):
            handle = module.nvmlDeviceGetHandleByIndex(index)
            labels = {"gpu": str(index)}
            for key, call in (("UUID", "nvmlDeviceGetUUID"), ("modelName", "nvmlDeviceGetName")):
                try:
                    value = getattr(module, call)(handle)
                    labels[key] = value.decode() if isinstance(value, bytes) else str(value)
                except Exception as exc:  # noqa: BLE001
                    log.debug("NVML %s of GPU %d: %s", call, index, exc)
            self.devices.append((handle, json.dumps(labels, sort_keys=True, separators=(",", ":"))))
        self.describe = {"source": self.name, "devices": len(self.devices)}

    def _raw(self, handle) -> dict[str, float]:
        nv = self.nvml
        readers = {
            "utilization": lambda: nv.nvmlDeviceGetUtilizationRates(handle),
            "memory": lambda: nv.nvmlDeviceGetMemoryInfo(handle),
            "power_mw": lambda: nv.nvmlDeviceGetPowerUsage(handle),
            "energy_mj": lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle),
            "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM),
            "temperature_c": lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
        }
        raw: dict[str, float] = {}
        for key, read in readers.items():
            try:
                value = read()
            except Exception as exc:  # noqa: BLE001  (NVMLError_NotSupported on some boards)
                log.debug("NVML %s: %s", key, exc)
                continue
            if key == "utilization":
                raw["utilization_gpu_percent"] = value.gpu
                raw["utilization_memory_percent"] = value.memory
            elif key == "memory":
                raw["memory_used_bytes"] = value.used
                raw["memory_free_bytes"] = value.free
            else:
                raw[key] = value
        return raw

    def poll(self) -> list[Row]:
        rows: list[Row] = []
        for handle, labels in self.devices:
            for metric, value in normalise_nvml(self._raw(handle)).items():
                rows.append((None, metric, labels, value))
        if not rows:
            raise SourceError("NVML returned no reading for any GPU")
        return rows

    def close(self) -> None:
        pass


# -- the poller ---------------------------------------------------------------------------------
@dataclass
class SourceState:
    source: object
    polls: int = 0
    failures: int = 0
    last_ok: float | None = None
    gap: dict | None = None
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

    def describe(self) -> dict:
        return {"variant": self.variant, "engine": self.engine, "base_url": self.base_url,
                "server_pid": self.server_pid, "prometheus_url": self.prometheus_url,
                "t_attach": self.t_attach, "t_detach": self.t_detach,
                "sources": [{**s.source.describe, "polls": s.polls, "failures": s.failures} for s in self.states],
                "errors": self.errors}


_NO_GPU_SAID = False


class TelemetryPoller:
    """Polls the attached variant's server (one at a time) until ``detach``; ``close`` writes the files."""

    def __init__(self, run_dir: str | Path, interval_s: float = 1.0, timeout_s: float | None = None,
                 flush_interval_s: float = 2.0, nvml_module=None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.parts_dir = self.run_dir / PARTS_DIR
        self.parts_dir.mkdir(exist_ok=True)
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s) if timeout_s is not None else max(0.2, 0.9 * self.interval_s)
        self.flush_interval_s = flush_interval_s
        self.buffer: list[tuple] = []
        self.part_count = 0
        self.rows_written = 0
        self.attachments: list[Attachment] = []
        self.current: Attachment | None = None
        self.gaps: list[dict] = []
        self.notes: list[dict] = []
        self.latest_values: dict[tuple[str, str, str, str], tuple[float, float]] = {}
        self.closed = False
        self.nvml, self.gpu_description = probe_nvml(nvml_module)
        if self.nvml is None:
            self._note("no_gpu", f"no GPU telemetry: {self.gpu_description}; recording the server process's "
                                 "CPU and resident memory instead")
            global _NO_GPU_SAID
            if not _NO_GPU_SAID:
                _NO_GPU_SAID = True
                log.warning("telemetry: no GPU (%s); recording the server process's CPU and resident memory "
                            "instead", self.gpu_description)
        self._flusher = gevent.spawn(self._flush_forever)
        self._write_meta()

    # -- public API -------------------------------------------------------------------------
    def attach(self, variant: str, engine: str, base_url: str, server_pid: int | None = None,
               prometheus_url: str | None = None, dcgm_url: str | None = None,
               prometheus_selector: str | None = None) -> None:
        """Start polling ``variant``'s server (call once it is healthy). Detaches a previous one first."""
        if self.closed:
            raise RuntimeError("the telemetry poller is closed")
        if self.current is not None:
            self.detach()
        att = Attachment(variant=variant, engine=engine, base_url=base_url.rstrip("/"), t_attach=now(),
                         server_pid=server_pid, prometheus_url=prometheus_url)
        sources: list[object] = []
        engine_map = map_for(engine)
        if prometheus_url:
            try:
                sources.append(PrometheusSource(prometheus_url, engine_map, prometheus_selector, self.timeout_s,
                                                dcgm_map=map_for("dcgm")))
            except Exception as exc:  # noqa: BLE001  (prometheus-api-client missing or bad URL)
                att.errors.append(f"Prometheus source not available ({exc}); scraping /metrics directly")
                log.warning("telemetry: %s", att.errors[-1])
                prometheus_url = None
        if not prometheus_url:
            sources.append(ScrapeSource("scrape", f"{att.base_url}/metrics", engine_map, self.timeout_s))
        if dcgm_url:
            url = dcgm_url if dcgm_url.rstrip("/").endswith("/metrics") else dcgm_url.rstrip("/") + "/metrics"
            sources.append(ScrapeSource("dcgm", url, map_for("dcgm"), self.timeout_s))
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
            self.flush()
            self.closed = True
            merge_parts(self.run_dir)
            for part in self.parts_dir.glob("part-*.parquet"):
                part.unlink()
            try:
                self.parts_dir.rmdir()
            except OSError:
                pass
            self._write_meta()
        return self.run_dir / TELEMETRY_FILE

    def latest(self, variant: str | None = None) -> dict[str, float]:
        """Last value per canonical metric (series combined by sum), for a live view."""
        out: dict[str, float] = {}
        for (v, _source, metric, _labels), (_t, value) in self.latest_values.items():
            if variant is None or v == variant:
                out[metric] = out.get(metric, 0.0) + value
        return out

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
        state.polls += 1
        try:
            with gevent.Timeout(self.timeout_s + 0.5, SourceError(f"no answer within {self.timeout_s + 0.5:.1f} s")):
                rows = state.source.poll()
        except Exception as exc:  # noqa: BLE001  (GreenletExit is not an Exception: kill still works)
            self._failed(att, state, t0, exc)
            return
        t = (t0 + now()) / 2.0
        if state.gap is not None:
            self._close_gap(state, t, recovered=True)
            log.info("telemetry: %s/%s answers again", att.variant, state.source.name)
        state.last_ok = t
        self._append(att, state, t, rows)

    def _append(self, att: Attachment, state: SourceState, t: float, rows: list[Row]) -> None:
        name = state.source.name
        for ts, metric, labels, value in rows:
            stamp = ts if ts is not None else t
            self.buffer.append((stamp, att.variant, name, metric, labels, value))
            self.latest_values[(att.variant, name, metric, labels)] = (stamp, value)

    def _failed(self, att: Attachment, state: SourceState, t: float, exc: BaseException) -> None:
        state.failures += 1
        message = str(exc) if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}"
        if not state.warned:
            state.warned = True
            log.warning("telemetry: %s/%s failed (%s); recording a gap, the load test continues",
                        att.variant, state.source.name, message)
        else:
            log.debug("telemetry: %s/%s still failing: %s", att.variant, state.source.name, message)
        if state.gap is None:
            state.gap = {"variant": att.variant, "source": state.source.name,
                         "start": state.last_ok if state.last_ok is not None else att.t_attach,
                         "first_failure": t, "end": None, "failures": 0, "error": message, "recovered": None}
            self.gaps.append(state.gap)
            self._write_meta()
        state.gap["failures"] += 1
        state.gap["last_error"] = message

    def _close_gap(self, state: SourceState, t: float, recovered: bool) -> None:
        gap, state.gap = state.gap, None
        gap["end"] = t
        gap["recovered"] = recovered
        self._write_meta()

    # -- files ------------------------------------------------------------------------------
    def _flush_forever(self) -> None:
        while True:
            gevent.sleep(self.flush_interval_s)
            try:
                self.flush()
            except OSError:
                log.exception("telemetry: could not write a part file; keeping the rows in memory")

    def flush(self) -> None:
        if not self.buffer:
            return
        rows, self.buffer = self.buffer, []
        columns = list(zip(*rows))
        table = pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, SCHEMA)], schema=SCHEMA)
        self.part_count += 1
        path = self.parts_dir / f"part-{self.part_count:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, path)
        except OSError:
            self.buffer = rows + self.buffer
            self.part_count -= 1
            raise
        self.rows_written += len(rows)

    def _note(self, kind: str, message: str) -> None:
        self.notes.append({"kind": kind, "t": now(), "message": message})

    def meta(self) -> dict:
        return {"interval_s": self.interval_s, "timeout_s": self.timeout_s, "gpu": self.gpu_description,
                "gpu_available": self.nvml is not None,
                "attachments": [a.describe() for a in self.attachments], "gaps": self.gaps, "notes": self.notes,
                "rows_written": self.rows_written}

    def _write_meta(self) -> None:
        path = self.run_dir / META_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.meta(), indent=2, default=str))
        os.replace(tmp, path)


def merge_parts(run_dir: str | Path) -> Path:
    """All part files (sorted by time) -> ``telemetry.parquet``; idempotent, also for a crashed run's parts."""
    run_dir = Path(run_dir)
    target = run_dir / TELEMETRY_FILE
    parts = sorted((run_dir / PARTS_DIR).glob("part-*.parquet"))
    tables = [pq.read_table(part, schema=SCHEMA) for part in parts]
    if target.exists() and not parts:
        return target
    table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    if table.num_rows:
        table = table.sort_by([("variant", "ascending"), ("t", "ascending")])
    tmp = run_dir / (TELEMETRY_FILE + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)
    return target
