"""HTTP to inference servers.

``engines`` (what each engine's requests look like) and ``accounting`` (stamped events -> token counts) are
pure. ``http`` (the requests session, imported after Locust so gevent has patched sockets), ``stream`` (one
stamped streaming request -> ``RequestRecord``), ``greedy`` (fixed greedy prompts) and ``tokenizer`` (the
server's ``/tokenize``, through ``control``) do I/O: import the module you need; this package imports nothing on
its own, so pure callers never pull in Locust.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
