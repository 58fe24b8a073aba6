"""``python -m locust_llm.refserver``: the reference streaming server (it lives in ``locust_llm.testing``)."""

import sys

from .testing.refserver import main

if __name__ == "__main__":
    sys.exit(main())
