"""``python -m locust_llm.refserver``: the reference server's command line (``cli``)."""

import sys

from .cli import main

__all__: list[str] = []

sys.exit(main())
