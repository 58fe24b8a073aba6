"""A worker process reads its streams' chunks while it takes a new user count: Locust's spawn handling must not
rebuild its argument parser once per option (each ladder step sends one)."""

import inspect

import locust  # noqa: F401  (gevent patching before anything else)
from locust import argument_parser
from locust.runners import WorkerRunner

from locust_llm.runtime import plugin
from locust_llm.runtime.options import OPTIONS


def test_a_spawn_message_parses_locust_s_defaults_once(monkeypatch):
    # The comprehension a worker evaluates on every spawn message; if Locust moves or fixes it, revisit the workaround.
    assert "argument_parser.default_args_dict()" in inspect.getsource(WorkerRunner.handle_message)
    # Locust's own function, unwrapped if a worker set up earlier in this process already cached it.
    original = getattr(argument_parser.default_args_dict, "__wrapped__", argument_parser.default_args_dict)
    monkeypatch.setattr(argument_parser, "default_args_dict", original)
    builds = []
    build = argument_parser.get_empty_argument_parser
    monkeypatch.setattr(argument_parser, "get_empty_argument_parser", lambda **kw: builds.append(1) or build(**kw))
    ours = [option.flag.lstrip("-").replace("-", "_") for option in OPTIONS]
    sent = [*vars(argument_parser.get_parser().parse_args([])), *ours]
    builds.clear()

    def custom() -> list[str]:
        return [k for k in sent if k not in argument_parser.default_args_dict()]

    unpatched = custom()
    assert len(builds) == len(sent) > 60  # the cost the workaround removes: one parser per option sent
    plugin.parse_locust_defaults_once()
    builds.clear()
    assert custom() == unpatched and custom() == unpatched
    assert len(builds) <= 1
    assert set(unpatched) >= set(ours)
