"""Test helpers that ship with the package: ``burner`` (a neighbour that burns CPU while a chosen server runs,
``python -m locust_llm.testing.burner``). The reference server is its own package, ``locust_llm.refserver``.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
