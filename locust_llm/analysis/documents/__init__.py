"""The documents the analysis writes, typed: ``summary.json``, ``verdict.json`` (``summary``) and ``compare.json``
(``regression``), with one module per experiment's part of the summary (``server``, ``speedup``, ``splits``,
``cost``, ``quality``, ``soak``, ``scale_out``, ``detected``).

``base.Doc`` is the model every document derives from: undeclared keys are errors, and each field's attribute
docstring is its description in the exported JSON Schema (``docs/summary.schema.json``); ``base.Interval`` is a
95% confidence interval. Documents that belong to one figure's computation (``conversations``, ``images``,
``probes``, ``prompt_cache``, ``traces``) sit beside it in ``analysis/``.
"""

__all__: list[str] = []  # a namespace: import its modules (``documents.summary`` imports the analysis modules)
