"""Where telemetry comes from: a server's ``/metrics`` page, a Prometheus, NVML, or the server's process.

Each source's ``poll()`` returns rows ``(t or None, canonical metric, labels JSON, value)`` or raises
``SourceError`` with the reason (which becomes a recorded gap). ``TelemetryPoller`` schedules them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable

import gevent
import psutil

from ..client.http import requests, session
from ..fmt import shown
from ..host.nvml import probe_nvml
from .maps import MetricMap, Reading, normalise_nvml
from .parse import MetricsParseError, Sample, parse_text

log = logging.getLogger(__name__)

__all__ = [
    "MAX_PAGE_BYTES",
    "MAX_SERIES",
    "NvmlSource",
    "ProcessSource",
    "PrometheusSource",
    "Row",
    "ScrapeSource",
    "SourceError",
    "probe_nvml",
    "promql_string",
]


class SourceError(RuntimeError):
    """A poll that produced no data: the reason goes into the gap record."""


Row = tuple  # (t or None, metric, labels_json, value)


def _rows(readings: list[Reading]) -> list[Row]:
    return [(r.timestamp, r.metric, r.labels_json(), float(r.value)) for r in readings]


# A /metrics page is read up to this size; a larger one is a named gap, never read whole (a page that size every
# poll would take the event loop the load shares).
MAX_PAGE_BYTES = 8 << 20
# Samples of the names a map reads, per page: real servers expose a few hundred; more is a page that lies.
MAX_SERIES = 4096
# An exposition timestamp this far from the client's clock is said (once per source): the server's clock is off, or
# its page is stale; the samples keep the poll's time either way.
FAR_TIMESTAMP_S = 300.0


class ScrapeSource:
    """GET a Prometheus text page and map it. The page is read up to ``MAX_PAGE_BYTES`` and parsed in a thread of
    gevent's pool (off the event loop the load shares); its samples are stamped with the client's poll time by the
    poller, never with the exposition's own timestamps (another clock: a server an hour behind would put every
    sample outside every window). A page whose timestamps lie more than ``FAR_TIMESTAMP_S`` from the client's clock
    is said once through ``note(kind, message)``, with the raw values."""

    def __init__(
        self,
        name: str,
        url: str,
        metric_map: MetricMap,
        timeout_s: float,
        note: Callable[[str, str], None] = lambda kind, message: None,
    ):
        self.name = name
        self.url = url
        self.map = metric_map
        self.timeout_s = timeout_s
        self.note, self.noted = note, False
        self.session = session("telemetry", pool_size=1)
        self.describe = {"source": name, "url": url, "map": metric_map.name}

    def poll(self) -> list[Row]:
        try:
            with self.session.get(self.url, timeout=(self.timeout_s, self.timeout_s), stream=True) as response:
                if response.status_code != 200:
                    raise SourceError(f"{self.url} answered HTTP {response.status_code}")
                page = self._read(response)
        except requests.RequestException as exc:
            raise SourceError(f"{self.url} unreachable: {type(exc).__name__}: {shown(exc)}") from None
        # The error comes back as a value: gevent prints an exception raised in its pool's thread, server text and all.
        samples = gevent.get_hub().threadpool.apply(_parsed, (page, self.map.wants))
        if isinstance(samples, MetricsParseError):
            raise SourceError(f"{self.url}: {samples}")
        if len(samples) > MAX_SERIES:
            names = Counter(s.name for s in samples).most_common(1)
            raise SourceError(
                f"{self.url}: {len(samples):,} samples of the metrics read (most: {shown(names[0][0], 80)}, "
                f"{names[0][1]:,}), more than the {MAX_SERIES:,} allowed; not recorded"
            )
        self._check_timestamps(samples)
        return [(None, *row[1:]) for row in _rows(self.map.normalise(samples))]

    def _check_timestamps(self, samples: list[Sample]) -> None:
        if self.noted:  # said once: every later poll costs nothing
            return
        clock = time.time()
        skews = [(s.timestamp - clock, s) for s in samples if s.timestamp is not None]
        if not skews:
            return
        # A stamp that is not a finite number (NaN, inf) is as far as any: never "near" by a failed comparison.
        skew, far = max(skews, key=lambda pair: abs(pair[0]) if math.isfinite(pair[0]) else math.inf)
        if not abs(skew) <= FAR_TIMESTAMP_S:
            self.noted = True
            self.note(
                "far_timestamps",
                f"{self.url}: sample timestamps far from the scrape ({shown(far.name, 80)} stamped {far.timestamp!r}, "
                f"{skew:+.4g} s from the client's clock, in {len(skews):,} stamped samples): the server's clock "
                "or its page is off; every sample keeps the client's poll time",
            )

    def _read(self, response) -> bytes:
        """The page's bytes, or a ``SourceError`` once it passes ``MAX_PAGE_BYTES``."""
        too_large = f"{self.url}: the page is larger than {MAX_PAGE_BYTES >> 20} MiB (the cap); not read"
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_PAGE_BYTES:
            raise SourceError(f"{too_large} (Content-Length {declared})")
        parts, size = [], 0
        for part in response.iter_content(1 << 16):
            parts.append(part)
            size += len(part)
            if size > MAX_PAGE_BYTES:
                raise SourceError(too_large)
        return b"".join(parts)

    def close(self) -> None:
        self.session.close()


def _parsed(page: bytes, wanted) -> list[Sample] | MetricsParseError:
    """``parse_text`` for a pool thread: the page's samples, or why it was refused."""
    try:
        return parse_text(page, wanted=wanted)
    except MetricsParseError as exc:
        return exc


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal, so that a quote or backslash in a variant name cannot end or bend a
    query: PromQL strings take Go's escapes, and JSON's are a subset of them."""
    return json.dumps(value, ensure_ascii=False)


class PrometheusSource:
    """Instant queries for every name the maps know; sample times are Prometheus's scrape times."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        engine_map: MetricMap,
        selector: str | None,
        timeout_s: float,
        dcgm_map: MetricMap | None = None,
        dcgm_selector: str | None = None,
    ):
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
        matchers = [f"__name__=~{promql_string(metric_map.prometheus_name_regex())}"]
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
            samples.append(
                Sample(
                    name=name, value=value, labels={k: v for k, v in labels.items() if k != "__name__"}, timestamp=ts
                )
            )
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
                raise SourceError(
                    f"Prometheus {self.url} has no current sample for {query[:200]} (target down or not scraped yet)"
                )
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
        with contextlib.suppress(psutil.Error):
            procs.extend(self.process.children(recursive=True))
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
            with contextlib.suppress(psutil.Error):
                rss += child.memory_info().rss
        wall, cpu = time.monotonic(), self._cpu_total(procs)
        rows: list[Row] = [(None, "process_rss_mib", "{}", rss / 2**20)]
        # CPU times tick in 10 ms steps: over a shorter wall interval the quotient is noise, so wait.
        if self._last is not None and wall - self._last[0] >= MIN_CPU_INTERVAL_S:
            rows.append((None, "process_cpu_cores", "{}", max(0.0, (cpu - self._last[1]) / (wall - self._last[0]))))
            self._last = (wall, cpu)
        return rows

    def close(self) -> None:
        pass


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
