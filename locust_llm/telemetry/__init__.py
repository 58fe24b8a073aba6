"""Server-side telemetry: what the server (and its GPU or process) knows that the client cannot see.

``parse`` (Prometheus text -> samples) and ``maps`` (engine metric names -> canonical names and units) are
pure and safe to import anywhere, including ``analysis/``. ``sources`` (scrape, Prometheus, NVML, process),
``poller`` (the gevent background poller) and ``prometheus_server`` (a project-owned Prometheus) do I/O and
import Locust: import them explicitly, never from here.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
