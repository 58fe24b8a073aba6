"""The base of every scenario section: a strict, frozen pydantic model. Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    # Every number finite: NaN or infinity in a scenario (or on the command line) is an error, not a crash later.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
