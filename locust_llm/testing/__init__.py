"""Test oracles that ship with the package: the reference streaming server (``refserver``), whose timing is
known exactly and which logs its own send times. Used by the tests and benchmarks, never in a measurement.
"""

__all__: list[str] = []  # a namespace: import its modules, nothing is re-exported here
