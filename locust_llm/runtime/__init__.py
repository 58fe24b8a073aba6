"""The Locust runtime: everything that imports locust or gevent. In: Locust's events; out: run directory files.

``plugin`` (arguments, listeners, ``LLMState``), ``plan`` (options + scenario -> ``Plan``), ``experiment``
(the ladder program and the post-run hand-off), ``session`` (servers, telemetry, consistency prompts),
``shape`` (``LadderShape``), ``steps`` (the step every process is in), ``users`` (closed/open-loop users),
``arrivals`` (open-loop clock), ``shipper`` / ``recorder`` (records from workers to ``requests.parquet``),
``clientmon``, ``live`` and ``webui`` (the load generator's health and the live tab).
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
