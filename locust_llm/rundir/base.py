"""The base of every typed run file (steps.json's rows and events, env.json, telemetry.json, consistency.json,
quality.json, probes.json): what the runtime writes and ``rundir.load`` reads back."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["RunFileModel"]


class RunFileModel(BaseModel):
    """A field the model does not describe is refused, so a misspelt one fails where the record is made, not in a
    report weeks later; each field's docstring is its description in the published JSON Schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    def written(self) -> dict[str, Any]:
        """The record as its file holds it: the fields it was given, in the model's order."""
        return self.model_dump(exclude_unset=True)
