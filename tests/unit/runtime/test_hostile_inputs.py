"""Round two of hostile inputs, on the runtime's own pieces: a refusing server is not asked thousands of times a
second (the backoff schedule, Retry-After honoured and capped), the drain outlasts a stream's own deadlines, a run
file is served only when it is a regular file, and a request that cannot be built is a refusal, never a row."""

import os
from types import SimpleNamespace

import pytest
from locust.env import Environment

from locust_llm.records import ErrorClass, Phase, RequestRecord, now
from locust_llm.runtime.cockpit import run_files
from locust_llm.runtime.plugin import STOP_MARGIN_S, fit_stop_timeout
from locust_llm.runtime.steps import StepState
from locust_llm.runtime.users import BACKOFF_MAX_S, RETRY_AFTER_MAX_S, Backoff, ClosedLoopUser, context_of
from locust_llm.runtime.webui import read_regular_file
from locust_llm.scenario import LoadSpec, Timeouts


def refused(after_s: float = 0.001, error: str = ErrorClass.CONNECT_ERROR, **fields) -> RequestRecord:
    t = 1000.0
    return RequestRecord(t_connect=t, t_done=t + after_s, error_class=error, **fields)


def test_a_user_backs_off_after_instant_failures_doubling_to_a_cap_and_not_after_answers():
    backoff = Backoff()
    waits = [backoff.after(refused(), None) for _ in range(8)]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0] and waits[-1] == BACKOFF_MAX_S
    assert backoff.after(RequestRecord(t_send=1.0, t_first=1.1, t_done=2.0), None) == 0.0  # an answer: at once
    slow_503 = refused(2.0, ErrorClass.HTTP_ERROR, t_send=1000.0, http_status=503)  # answered slowly: not a spin
    assert backoff.after(slow_503, None) == 0.0
    assert backoff.after(refused(0.001, ErrorClass.HTTP_ERROR, t_send=1000.0, http_status=503), 3.0) == 3.0
    assert backoff.after(refused(0.001, ErrorClass.HTTP_ERROR, http_status=429), 3600.0) == RETRY_AFTER_MAX_S
    assert backoff.after(refused(30.0, ErrorClass.TLS_ERROR), None) > 0  # never reached the server: however long


def test_the_drain_outlasts_the_first_token_and_idle_timeouts():
    """Locust's stop timeout without --stop-timeout: longer than the stream's own deadlines, so a hung first token
    ends as first_token_timeout before the drain would cancel it; a shorter --stop-timeout is kept, and said."""
    environment = SimpleNamespace(parsed_options=SimpleNamespace(stop_timeout=0), stop_timeout=60.0)
    fit_stop_timeout(environment, Timeouts())  # the defaults: first token 120 s, idle 60 s
    assert environment.stop_timeout == Timeouts().first_token_s + STOP_MARGIN_S > 60.0
    fit_stop_timeout(environment, Timeouts(first_token_s=3, idle_s=2))
    assert environment.stop_timeout == 60.0  # Locust's own default of ours still holds when longer
    chosen = SimpleNamespace(parsed_options=SimpleNamespace(stop_timeout=10), stop_timeout=10.0)
    fit_stop_timeout(chosen, Timeouts())
    assert chosen.stop_timeout == 10.0


def test_only_regular_files_of_the_run_directory_are_listed_and_served(tmp_path):
    (tmp_path / "summary.md").write_text("# fine")
    (tmp_path / "evil.txt").symlink_to("/etc/passwd")
    (tmp_path / "inside.txt").symlink_to(tmp_path / "summary.md")  # a link, even to a run file
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / ".lock").write_text("{}")
    (tmp_path / "requests.parts").mkdir()
    assert run_files(tmp_path) == ["summary.md"]
    assert read_regular_file(tmp_path / "summary.md") == b"# fine"
    for name in ("evil.txt", "inside.txt", "pipe.log", "requests.parts", "missing.json"):
        assert read_regular_file(tmp_path / name) is None, name


class Shipper:
    def __init__(self):
        self.records, self.refusals, self.created = [], [], 0

    def add(self, record) -> None:
        self.records.append(record)

    def refuse(self, message: str) -> None:
        self.refusals.append(message)


class Unbuildable:
    counter = None
    trace = None

    def item(self, worker: int, step: int, index: int, context: int = 0):
        raise OSError("images/cat.png: No such file or directory")


def test_a_request_that_cannot_be_built_is_a_refusal_not_a_row():
    environment = Environment(user_classes=[ClosedLoopUser])
    shipper = Shipper()
    context = context_of(environment)
    context.configure(LoadSpec(), worker=0, engine="external", shipper=shipper, workload_factory=lambda url: None)
    context.workloads["http://127.0.0.1:9"] = Unbuildable()
    state = StepState(run_id="r", variant="v", step=0, level=1, phase=Phase.STEADY, base_url="http://127.0.0.1:9")
    context.board.update(state, now())
    user = ClosedLoopUser(environment)
    user.on_start()
    for _ in range(3):
        user.send(state, user.new_record(state))
    assert shipper.records == [] and shipper.created == 0  # no phantom row, nothing counted as made
    assert shipper.refusals == ["OSError: images/cat.png: No such file or directory"] * 3
    assert user.wait_time() == pytest.approx(BACKOFF_MAX_S + LoadSpec().think_time_s)
