"""Pure analysis of a run: ``RunData`` in, typed documents out (``documents``: summary, verdict, comparison).

``summary`` builds ``summary.json``; ``speedup`` (variant vs baseline), ``regression`` (run vs run), ``gates``
(the exit code), ``server_metrics`` (the server's own figures), ``timeline`` (series over time), ``errors``,
``agreement`` (greedy consistency), ``curves`` (saturation, knee), ``steady``, ``validity``, ``stats``,
``metrics`` (per request), ``merge`` (several runs as one). No Locust, no file access.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
