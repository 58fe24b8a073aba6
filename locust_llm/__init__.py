"""Locust as a load tester for LLM inference servers. A namespace: import its modules (``locust_llm.cli``, ...)."""

__all__: list[str] = []
