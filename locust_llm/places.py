"""Where the project's own files are, whatever the working directory: a nightly job or an installed plugin starts
anywhere, so nothing built in is looked up relative to it.

* The built-in scenarios are the ``scenarios/`` folder of the project the package is installed from (``pip install
  -e``: the checkout); the default scenario is ``tiny-cpu.yaml`` there. The quality task sets ship inside the
  package (``scenario.quality.BUILTIN_TASKS``).
* Saved baselines live in one library, the same for ``locust-llm baseline save`` and ``--baseline-run``: the folder
  given (``--library``, or ``gates.library`` in a scenario: relative to the scenario's folder), else
  ``$LOCUST_LLM_BASELINES``, else the project's ``baselines/``.

Pure: no Locust import.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BASELINES_ENV", "DEFAULT_SCENARIO", "PROJECT", "SCENARIOS", "baseline_library", "shown"]

PROJECT = Path(__file__).resolve().parent.parent
SCENARIOS = PROJECT / "scenarios"
DEFAULT_SCENARIO = SCENARIOS / "tiny-cpu.yaml"
BASELINES_ENV = "LOCUST_LLM_BASELINES"


def baseline_library(given: str | Path | None = None, base: Path | None = None) -> Path:
    """The baseline library: ``given`` (a relative one against ``base``, the scenario's folder, when known), else
    ``$LOCUST_LLM_BASELINES``, else the project's ``baselines/``."""
    if given:
        path = Path(given).expanduser()
        return path if path.is_absolute() or base is None else base / path
    from_env = os.environ.get(BASELINES_ENV)
    return Path(from_env).expanduser() if from_env else PROJECT / "baselines"


def shown(path: str | Path) -> str:
    """A path as a person reads it: relative to the working directory when it is inside it, else absolute."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
