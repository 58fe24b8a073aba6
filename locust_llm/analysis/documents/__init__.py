"""The documents the analysis writes, typed: ``summary.json``, ``verdict.json`` (``summary``) and ``compare.json``
(``regression``), with one module per experiment's part of the summary (``server``, ``speedup``, ``splits``,
``cost``, ``quality``, ``soak``, ``scale_out``, ``detected``, ``conversations``, ``images``, ``probes``,
``prompt_cache``, ``traces``).

``base.Doc`` is the model every document derives from: undeclared keys are errors, and each field's attribute
docstring is its description in the exported JSON Schema (``docs/summary.schema.json``); ``base.Interval`` is a
95% confidence interval. Every document lives here, never beside the computation that fills it: an analysis module
may import its documents, and nothing here imports the analysis modules.
"""

__all__: list[str] = []  # a namespace: import its modules
