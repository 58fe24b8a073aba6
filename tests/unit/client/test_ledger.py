"""Every request besides the streams is counted with the step that ran when it was sent, and processes' ledgers add
up step by step."""

from locust_llm.client import ledger


def test_requests_are_counted_with_the_step_that_ran_and_processes_add_up(monkeypatch):
    running: list[tuple[str, int] | None] = [None]
    monkeypatch.setattr(ledger, "_step_running", ledger._step_running)
    ledger.reset()
    ledger.watch(lambda: running[0])
    url = "http://user:pw@127.0.0.1:8000/tokenize?key=K"
    ledger.count("token counting", "post", url)  # before the first step
    running[0] = ("spec", 1)
    ledger.count("telemetry", "GET", "http://127.0.0.1:8000/metrics")
    ledger.count("telemetry", "GET", "http://127.0.0.1:8000/metrics")
    running[0] = None
    ledger.count("token counting", "POST", url)  # in the pause
    worker = ledger.snapshot()
    running[0] = ("spec", 2)
    ledger.count("telemetry", "GET", "http://127.0.0.1:8000/metrics")
    both = ledger.merged(worker, ledger.snapshot())
    ledger.reset()

    assert [(e["path"], e["count"], e["while_running"]) for e in worker["requests"]] == [
        ("/metrics", 2, [{"variant": "spec", "step": 1, "count": 2}]),
        ("/tokenize", 2, []),
    ]
    assert all(e["server"] == "http://127.0.0.1:8000" and e["method"] in ("GET", "POST") for e in worker["requests"])
    # The second snapshot holds the first's counts again (a running total) plus one: merged as two processes would be.
    assert [(e["path"], e["count"], e["while_running"]) for e in both["requests"]] == [
        ("/metrics", 5, [{"variant": "spec", "step": 1, "count": 4}, {"variant": "spec", "step": 2, "count": 1}]),
        ("/tokenize", 4, []),
    ]
