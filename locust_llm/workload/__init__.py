"""The prompts a load test sends: ``LoadSpec`` -> ``PromptItem`` per (worker, step, index). No Locust imports.

``workload`` (the ``Workload`` class), ``tokenizers`` (local token counters; the server's own is
``client.tokenizer``), ``generate`` (texts of an exact token count, unique prefixes), ``datasets`` (JSONL /
ShareGPT), ``items`` (``PromptItem``, hashing).
"""

from .datasets import DatasetRecord, read_dataset
from .items import PromptItem, WorkloadError
from .tokenizers import ApproxCounter, LocalTokenizer, TokenCounter
from .workload import Workload

__all__ = [
    "ApproxCounter",
    "DatasetRecord",
    "LocalTokenizer",
    "PromptItem",
    "TokenCounter",
    "Workload",
    "WorkloadError",
    "read_dataset",
]
