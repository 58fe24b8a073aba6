"""A batch of records on its way from a worker to the recorder, as columns: one list per scalar field, and per
chunk list one packed array of every record's items plus one packed array of per-record lengths.

The master turns such a batch into an Arrow table (``REQUESTS_SCHEMA``) without a dict per record or a Python
object per chunk; with a dict per record, msgpack, Locust's decode hook, ``Table.from_pylist`` and the live
figures' loop did Python work per token, five to seven times the master's CPU per record
(``benchmarks/master_ingest.py``). The chunk lists are packed as the schema stores them
(little-endian float32 offsets, int32 counts), so the table holds the values a per-record conversion would have
stored. A record whose chunk lists cannot be packed that way (an item of another type, a value beyond the type's
range) travels as a dict and is converted row by row, where a value that does not fit costs only its own row.
"""

from __future__ import annotations

import struct
from operator import attrgetter

import numpy as np
import pyarrow as pa

from ..records import REQUESTS_SCHEMA, RequestRecord

__all__ = ["ColumnBatch", "to_rows", "to_table"]

# the schema's float32 and int32
LISTS = {
    "chunk_offsets": ("f", "<f4"),
    "chunk_tokens": ("i", "<i4"),
    "chunk_drafted": ("i", "<i4"),
    "chunk_accepted": ("i", "<i4"),
}
SCALARS = [f.name for f in REQUESTS_SCHEMA if f.name not in LISTS]
_scalars = attrgetter(*SCALARS)


class ColumnBatch:
    """The records a worker has not shipped yet, kept as they will travel."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []  # the scalar fields of each record, in ``SCALARS`` order
        self.items: dict[str, list[bytes]] = {name: [] for name in LISTS}  # per record, packed
        self.lengths: dict[str, list[int]] = {name: [] for name in LISTS}
        self.misfits: list[dict] = []  # records whose chunk lists do not pack: shipped as dicts

    def __len__(self) -> int:
        return len(self.rows) + len(self.misfits)

    def add(self, record: RequestRecord) -> None:
        lists = {name: getattr(record, name) for name in LISTS}
        try:  # struct: the fastest packer of a list of Python numbers (arrays and numpy take 3x as long)
            packed = {
                name: struct.pack(f"<{len(lists[name])}{code}", *lists[name]) for name, (code, _) in LISTS.items()
            }
        except (struct.error, TypeError, OverflowError, ValueError):
            self.misfits.append(record.to_dict())
            return
        self.rows.append(_scalars(record))
        for name, items in packed.items():
            self.items[name].append(items)
            self.lengths[name].append(len(lists[name]))

    def extend(self, other: ColumnBatch) -> None:
        self.rows += other.rows
        self.misfits += other.misfits
        for name in LISTS:
            self.items[name] += other.items[name]
            self.lengths[name] += other.lengths[name]

    def columns(self) -> dict | None:
        """The packed records (the message's ``columns``), None when there are none."""
        if not self.rows:
            return None
        values = dict(zip(SCALARS, map(list, zip(*self.rows, strict=False)), strict=False))
        lists = {
            name: [b"".join(self.items[name]), struct.pack(f"<{len(self.rows)}i", *self.lengths[name])]
            for name in LISTS
        }
        return {"n": len(self.rows), "values": values, "lists": lists}


def _list_arrays(columns: dict) -> dict[str, pa.Array]:
    arrays = {}
    for name, (_, dtype) in LISTS.items():
        items, lengths = columns["lists"][name]
        offsets = np.zeros(columns["n"] + 1, np.int32)
        np.cumsum(np.frombuffer(lengths, "<i4"), out=offsets[1:])
        arrays[name] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.frombuffer(items, dtype)))
    return arrays


def to_table(columns: dict) -> pa.Table:
    """A batch's columns -> a ``REQUESTS_SCHEMA`` table; raises like ``pa.array`` when a value does not fit."""
    lists = _list_arrays(columns)
    arrays = [
        lists[f.name] if f.name in lists else pa.array(columns["values"][f.name], type=f.type) for f in REQUESTS_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=REQUESTS_SCHEMA)


def to_rows(columns: dict) -> list[dict]:
    """A batch's records as dicts, for the row-by-row conversion that isolates a value that does not fit."""
    lists = {name: chunks.to_pylist() for name, chunks in _list_arrays(columns).items()}
    names = SCALARS + list(lists)
    return [
        dict(zip(names, values, strict=False))
        for values in zip(*(columns["values"][s] for s in SCALARS), *lists.values(), strict=False)
    ]
