"""The base of every output document (``Doc``) and the confidence interval's type (``Interval``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Doc", "Interval"]

Interval = list[float] | None


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
