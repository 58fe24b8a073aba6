"""A running server per variant: ``--variant NAME=URL,...`` or an external scenario's variants with a ``url``; every
variant is measured (the first the baseline), each on its own server with its own model name and key variable."""

import pytest

from locust_llm.client.engines import API_KEY_ENV, KEY_ENVS, auth_headers, use_key_env
from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import options

LAUNCHED = str(REPO / "scenarios" / "tiny-cpu-test.yaml")

EXTERNAL = """
name: two
server: {engine: external}
variants:
  base: {url: "http://127.0.0.1:8000/", model: m-base}
  eagle3: {url: "http://127.0.0.1:8001", api_key_env: EAGLE_KEY}
"""


def scenario(tmp_path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


def test_the_command_line_names_each_variants_server_the_first_the_baseline():
    plan = load_plan(options(scenario=LAUNCHED, variant="fast=http://127.0.0.1:8001, slow=http://127.0.0.1:8000"))
    assert plan.variants == ["fast", "slow"] and plan.scenario.baseline_variant == "fast"
    assert plan.engine == "external" and plan.scenario.server.engine == "external"
    assert plan.server_of("slow").url == "http://127.0.0.1:8000" and plan.server_of("fast").url.endswith(":8001")
    assert plan.load.ladder == [1, 2]  # the scenario's load stays
    assert "cost" not in plan.skipped  # the test scenario has no price; the built-in one's is dropped when named


def test_scenario_urls_models_and_key_variables(tmp_path):
    plan = load_plan(options(scenario=scenario(tmp_path, EXTERNAL)))
    assert plan.variants == ["base", "eagle3"] and not plan.one_server
    base, eagle = plan.server_of("base"), plan.server_of("eagle3")
    assert (base.url, base.model, base.api_key_env) == ("http://127.0.0.1:8000", "m-base", API_KEY_ENV)
    assert (eagle.url, eagle.model, eagle.api_key_env) == ("http://127.0.0.1:8001", "", "EAGLE_KEY")
    assert load_plan(options(scenario=scenario(tmp_path, EXTERNAL), variant="eagle3")).variants == ["eagle3"]
    # --host still means one server: the one variant named.
    plan = load_plan(options(scenario=scenario(tmp_path, EXTERNAL)), host="http://127.0.0.1:9000")
    assert plan.variants == ["base"] and plan.server_of("base").url == "http://127.0.0.1:9000"


def test_each_server_gets_the_key_of_its_own_variable(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "shared")
    monkeypatch.setenv("EAGLE_KEY", "eagle")
    monkeypatch.setattr("locust_llm.client.engines.KEY_ENVS", {})
    use_key_env("http://127.0.0.1:8001/", "EAGLE_KEY")
    assert auth_headers("http://127.0.0.1:8001/v1/completions") == {"Authorization": "Bearer eagle"}
    assert auth_headers("http://127.0.0.1:8001") == {"Authorization": "Bearer eagle"}
    assert auth_headers("http://127.0.0.1:80011/v1/models") == {"Authorization": "Bearer shared"}
    assert auth_headers("http://127.0.0.1:8000/v1/completions") == {"Authorization": "Bearer shared"}
    assert KEY_ENVS == {}  # the module's own registry was left alone


@pytest.mark.parametrize(
    ("variant", "host", "words"),
    [
        ("a=http://127.0.0.1:1,b", None, "give every variant its server as NAME=URL"),
        ("a=http://127.0.0.1:1,a=http://127.0.0.1:2", None, "names 'a' twice"),
        ("../a=http://127.0.0.1:1", None, "is not a plain name"),
        ("a=ftp://x,b=http://127.0.0.1:2", None, "--variant: variants.a.url must be an http(s) URL"),
        ("a=http://127.0.0.1:1,b=http://127.0.0.1:2", "http://127.0.0.1:3", "give one of them"),
    ],
)
def test_bad_variant_servers_are_refused_with_the_fix(variant, host, words):
    with pytest.raises(ScenarioError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_plan(options(scenario=LAUNCHED, variant=variant), host=host)


def test_a_url_on_a_launched_variant_or_an_external_variant_without_one_is_refused(tmp_path):
    launched = "name: t\nserver: {engine: vllm, model: m}\nvariants: {a: {url: 'http://127.0.0.1:1'}}\n"
    with pytest.raises(ScenarioError, match="are for engine 'external'"):
        load_plan(options(scenario=scenario(tmp_path, launched)))
    partial = "name: t\nserver: {engine: external}\nvariants: {a: {url: 'http://127.0.0.1:1'}, b: {}}\n"
    with pytest.raises(ScenarioError, match=r"variants.b has none"):
        load_plan(options(scenario=scenario(tmp_path, partial)))
    bad_key = "name: t\nserver: {engine: external}\nvariants: {a: {url: 'http://127.0.0.1:1', api_key_env: 'A B'}}\n"
    with pytest.raises(ScenarioError, match="api_key_env"):
        load_plan(options(scenario=scenario(tmp_path, bad_key)))
