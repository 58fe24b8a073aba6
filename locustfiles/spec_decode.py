"""locust -f locustfiles/spec_decode.py [--headless] [--scenario scenarios/X.yaml] [--host URL]

The plugin's options: `locust-llm options` or docs/options.md (Locust's --help prints before this file is imported).

Thin on purpose: importing the plugin registers its arguments and listeners; the names below are
the user classes and the ladder shape Locust picks up from this file.
"""

import locust_llm.runtime.plugin  # noqa: F401  (registers arguments and event listeners)
from locust_llm.runtime.shape import LadderShape  # noqa: F401
from locust_llm.runtime.users import ClosedLoopUser, OpenLoopUser  # noqa: F401
