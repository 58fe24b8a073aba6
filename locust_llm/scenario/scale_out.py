"""The scale-out measurement's settings: the scenario's ``scale_out:`` section, ``--scale-out N`` and
``--scale-out-urls``, resolved into a ``ScaleOutPlan``. Pure: no Locust, no I/O.

The capacity answer divides an offered load by one server's goodput, which assumes that n servers serve n times
as much. A scale-out measurement tests that on the servers the user has: after a variant's ladder, one server at
``level`` and N servers at N x ``level`` (the requests spread over them round-robin, as a load balancer would), in
ABBA-ordered pairs of steps, so the slope (N servers' goodput / one server's) is a paired ratio with its interval.
Launched engines get N - 1 more servers of the variant on free ports; an external server (``--host``) needs the
URLs of its other replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator

from .base import Strict

__all__ = ["MAX_SERVERS", "ScaleOutPlan", "ScaleOutSpec", "scale_out_plan"]

MAX_SERVERS = 16


def _check_url(url: str, where: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where} must be http(s) URLs such as http://10.0.0.2:8000, found {url!r}")
    return url.rstrip("/")


class ScaleOutSpec(Strict):
    """``scale_out:``: one server against N servers of the same variant, after each variant's ladder."""

    servers: int = Field(default=0, ge=0, le=MAX_SERVERS)  # 0: off (``--scale-out N`` turns it on); else N >= 2
    level: float | None = Field(default=None, gt=0)  # per server; default: the ladder's highest level
    pairs: int = Field(default=2, ge=1, le=100)  # (1 server, N servers) step pairs, ABBA: 1,N then N,1 ...
    urls: list[str] = []  # an external server's other replicas (the first server is --host)
    # Gate: N servers must serve at least this share of N x one server's goodput (exit 3 when the whole CI of the
    # scaling efficiency lies below it); null: no gate.
    min_efficiency: float | None = Field(default=None, gt=0, le=1)

    @field_validator("servers")
    @classmethod
    def _not_one(cls, servers: int) -> int:
        if servers == 1:
            raise ValueError("one server is no scale-out: 0 (off) or 2 and more")
        return servers

    @field_validator("urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        return [_check_url(url, "scale_out.urls") for url in urls]


@dataclass(frozen=True)
class ScaleOutPlan:
    """What the scale-out measurement does; written to env.json as ``scale_out`` (the analysis reads it there)."""

    # env.json's schema (``rundir.env``) takes each field's description from its docstring
    __pydantic_config__ = ConfigDict(use_attribute_docstrings=True)

    servers: int
    """Servers of the N-server steps."""
    level: float
    """The level per server: the one-server steps run at it, the N-server steps at servers x level."""
    pairs: int
    """One-server/N-server pairs of steps measured."""
    min_efficiency: float | None
    """The gate: N servers must serve at least this share of N x one server's goodput (exit 3 when the whole CI
    of the scaling efficiency lies below it); null: no gate."""
    urls: list[str] = field(default_factory=list)
    """The external replicas beyond ``--host`` (empty: launched servers)."""


def scale_out_plan(
    spec: ScaleOutSpec, servers_option: int | None, urls_option: str, ladder: list[float], external_url: str | None
) -> ScaleOutPlan | None:
    """The scenario's section with ``--scale-out N`` (None: the scenario's; 0: off) and ``--scale-out-urls``
    (a comma list; implies N = 1 + its length) applied; None when it is off. ``ValueError`` names the fix."""
    urls = [_check_url(u.strip(), "--scale-out-urls") for u in urls_option.split(",") if u.strip()] or spec.urls
    servers = spec.servers if servers_option is None else servers_option
    if urls and servers == 0:
        servers = len(urls) + 1
    if servers == 0:
        return None
    if not 2 <= servers <= MAX_SERVERS:
        raise ValueError(f"--scale-out must be 0 (off) or 2..{MAX_SERVERS} servers, found {servers}")
    if external_url is None and urls:
        raise ValueError(
            "scale_out.urls / --scale-out-urls are the other replicas of an external server (--host); "
            "launched servers get their replicas started by locust-llm: leave the URLs out"
        )
    if external_url is not None:
        if len(urls) != servers - 1:
            raise ValueError(
                f"a scale-out over {servers} external servers needs {servers - 1} URL(s) besides --host "
                f"in --scale-out-urls (or scale_out.urls), found {len(urls)}"
            )
        known = [external_url.rstrip("/")] + urls
        repeated = sorted({u for u in known if known.count(u) > 1})
        if repeated:
            raise ValueError(f"--scale-out-urls repeats {', '.join(repeated)}: each server once (--host is the first)")
    return ScaleOutPlan(
        servers=servers,
        level=spec.level or max(ladder),
        pairs=spec.pairs,
        min_efficiency=spec.min_efficiency,
        urls=urls if external_url is not None else [],
    )
