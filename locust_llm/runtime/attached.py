"""Servers already running, one per variant: ``--variant NAME=URL,NAME=URL`` or an ``engine: external`` scenario whose
variants carry a ``url``. They are measured like launched variants (interleaved ABBA blocks, paired requests); only
the server of each variant is one the run did not start.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from ..client.engines import API_KEY_ENV
from ..scenario import Scenario, ScenarioError, ServerSpec, Variant, format_errors, not_plain, valid_name

__all__ = ["Attached", "attach_scenario", "attached_servers", "variant_urls"]


@dataclass(frozen=True)
class Attached:
    """The running server one variant is measured on."""

    url: str
    model: str = ""  # the model name to request ("": the one the server serves)
    api_key_env: str = API_KEY_ENV  # the environment variable that holds its API key


def variant_urls(option: str) -> dict[str, str]:
    """``--variant baseline=http://a:8000,eagle3=http://b:8000`` -> {name: url}, in the order given (the first is the
    baseline); {} for a plain list of names."""
    entries = [entry.strip() for entry in option.split(",") if entry.strip()]
    if not any("=" in entry for entry in entries):
        return {}
    urls: dict[str, str] = {}
    for entry in entries:
        name, eq, url = (part.strip() for part in entry.partition("="))
        if not eq or not url:
            raise ScenarioError(
                f"--variant {entry!r}: give every variant its server as NAME=URL (e.g. "
                "baseline=http://127.0.0.1:8000,eagle3=http://127.0.0.1:8001), or only names"
            )
        if not valid_name(name):
            raise ScenarioError(not_plain("--variant", name) + ": it names the variant's server log and metrics")
        if name in urls:
            raise ScenarioError(f"--variant names {name!r} twice; each variant has one server")
        urls[name] = url
    return urls


def attach_scenario(scenario: Scenario, urls: dict[str, str]) -> Scenario:
    """The scenario's load, SLOs and gates, measured on the running servers ``urls`` (the first one the baseline)
    instead of the servers it would launch."""
    variants = {}
    for name, url in urls.items():
        own = scenario.variants.get(name) if scenario.server.engine == "external" else None
        variants[name] = Variant(url=url, model=own and own.model, api_key_env=own and own.api_key_env)
    try:
        attached = Scenario.model_validate(
            {
                **scenario.model_dump(exclude={"server", "variants", "baseline", "sweeps", "source"}),
                "server": ServerSpec(engine="external"),
                "variants": variants,
                "source": scenario.source,
            }
        )
    except ValidationError as exc:
        raise ScenarioError(f"--variant: {'; '.join(format_errors(exc, Scenario))}") from None
    return attached


def attached_servers(scenario: Scenario) -> dict[str, Attached]:
    """Each variant's running server in an ``engine: external`` scenario (its own url, else ``server.url``); {} when
    the scenario launches its servers."""
    if scenario.server.engine != "external":
        return {}
    return {
        name: Attached(
            url=(variant.url or scenario.server.url or "").rstrip("/"),
            model=variant.model or "",
            api_key_env=variant.api_key_env or API_KEY_ENV,
        )
        for name, variant in scenario.variants.items()
    }
