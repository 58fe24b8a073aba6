"""The run directory: the only code that names, writes or reads run files.

``layout`` (file names, the atomic writer, ``RunDir``), ``parts`` (rows -> part files -> merged Parquet),
``load`` (run directory -> ``RunData``), ``facts`` (host and package facts for ``env.json``). No Locust imports.
"""

from . import layout
from .layout import RunDir, is_run_dir, read_json, write_json, write_text
from .load import RunData, load_requests, load_run
from .parts import PartWriter

__all__ = [
    "PartWriter",
    "RunData",
    "RunDir",
    "is_run_dir",
    "layout",
    "load_requests",
    "load_run",
    "read_json",
    "write_json",
    "write_text",
]
