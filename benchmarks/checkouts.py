"""Earlier commits of this repository as trees of files, for benchmarks that measure them beside this checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def export(commit: str, into: Path) -> Path:
    """The files of ``commit`` (``git archive``) in a new directory under ``into``."""
    tree = into / commit
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree
