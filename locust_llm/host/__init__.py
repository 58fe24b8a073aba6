"""The machine the run is on: ``scan`` (per-second CPU and GPU use of the run's processes against everyone
else's, run as a process of its own: ``python -m locust_llm.host.scan``), ``procs`` (child processes that die with
us and stop as a group; the local process behind a URL) and ``nvml`` (the one NVML handle). Pure: no Locust, no
gevent; this package imports nothing on its own, so the scanner's process stays unpatched.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
