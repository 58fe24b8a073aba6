"""The reference streaming server, the measurement oracle: an OpenAI-compatible SSE server whose timing is known
exactly and which logs its own send times. Used by the tests and benchmarks, never in a measurement.

``python -m locust_llm.refserver`` runs it (``cli``). ``server`` (the gevent WSGI application), ``config`` (its
defaults, the ``ref`` object's checks and the token schedule, pure), ``cache`` (its prompt cache), ``images``
(chat content parts), ``auth`` (``--api-key``), ``crash`` (``--exit-on``). This package imports nothing on its own,
so ``config`` can be imported without gevent.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
