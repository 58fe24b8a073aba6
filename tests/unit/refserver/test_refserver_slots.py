"""The reference server's capacity cap (``--slots K``): at most K streams generate at once, the others queue FIFO and
their TTFT starts when they get a slot; a client that goes away frees its slot. Judged from the server's own log
(``t_recv``, ``t_slot``, chunk stamps), the independent truth, never from client wall-clock thresholds."""

from __future__ import annotations

import json
import socket
import uuid

import gevent
import pytest
import requests

from locust_llm.refserver import cli as refserver_cli
from locust_llm.refserver.server import _Slots

# A long TTFT: the six requests must all arrive before the first stream ends, even on a busy machine.
TTFT_S, GAP_S, MAX_TOKENS = 0.5, 0.01, 10


def body(stream_id: str, max_tokens: int = MAX_TOKENS, **ref) -> dict:
    return {"prompt": "one two three", "max_tokens": max_tokens, "stream": True, "ref": {"id": stream_id, **ref}}


def stream_fully(url: str, stream_id: str) -> None:
    with requests.post(url + "/v1/completions", json=body(stream_id), stream=True, timeout=30) as response:
        assert response.status_code == 200, response.text
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == b"data: [DONE]", lines[-3:]


def six_at_once(server) -> dict[str, dict]:
    """Six concurrent streams of MAX_TOKENS tokens; their server logs by id."""
    ids = [f"slots-{uuid.uuid4().hex[:8]}-{i}" for i in range(6)]
    gevent.joinall([gevent.spawn(stream_fully, server.url, i) for i in ids], raise_error=True, timeout=120)
    logs = {entry["id"]: entry for entry in server.all_logs()}
    assert set(ids) <= set(logs)
    for i in ids:
        assert logs[i]["complete"], logs[i]
    return {i: logs[i] for i in ids}


def end(log: dict) -> float:
    return log["chunks"][-1][0]


def first_token(log: dict) -> float:
    return next(t for t, tokens, _ in log["chunks"] if tokens > 0)


def max_depth(logs: list[dict]) -> int:
    """How many [t_slot, last chunk] intervals overlap at most."""
    return max(sum(1 for o in logs if o["t_slot"] <= log["t_slot"] < end(o)) for log in logs)


def test_at_most_k_streams_generate_and_the_rest_queue_with_the_wait_in_their_ttft(refserver_factory):
    server = refserver_factory("--slots", "2", "--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))
    logs = list(six_at_once(server).values())
    # the six arrived together: before any stream could have ended (a stream lasts >= TTFT + 9 gaps = 590 ms)
    assert max(log["t_recv"] for log in logs) < min(end(log) for log in logs), "the requests did not arrive together"
    assert max_depth(logs) == 2
    by_slot = sorted(logs, key=lambda log: log["t_slot"])
    ends = sorted(end(log) for log in logs)
    first_end = ends[0]
    started, waited = by_slot[:2], by_slot[2:]
    # the first two got their slots at once (before any stream ended: no release to wait for) ...
    assert all(log["t_slot"] < first_end for log in started)
    assert all(0 <= log["t_slot"] - log["t_recv"] < first_end - log["t_recv"] for log in started)
    # ... the other four each waited for a release: the n-th waiter only after n streams had ended
    for n, log in enumerate(waited):
        assert log["t_slot"] >= ends[n] > log["t_recv"], (n, log["t_slot"], ends)
    # queueing shows up as TTFT: a waiter's TTFT delay counts from its slot (one served at once: from arrival)
    for log in started:
        assert first_token(log) >= log["t_recv"] + TTFT_S
    for log in waited:
        assert first_token(log) >= log["t_slot"] + TTFT_S
        assert first_token(log) - log["t_recv"] >= (log["t_slot"] - log["t_recv"]) + TTFT_S > TTFT_S


def test_no_slots_means_no_cap_and_no_waiting(refserver_factory):
    server = refserver_factory("--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))  # --slots 0: the default
    logs = list(six_at_once(server).values())
    assert max(log["t_recv"] for log in logs) < min(end(log) for log in logs), "the requests did not arrive together"
    first_end = min(end(log) for log in logs)
    assert all(log["t_slot"] < first_end for log in logs)  # nobody waited for a release
    assert max_depth(logs) == 6
    for log in logs:  # the old schedule: the first token at arrival + TTFT
        assert first_token(log) >= log["t_recv"] + TTFT_S


def read_first_event(sock: socket.socket) -> bytes:
    data = b""
    while b"\ndata: " not in data and not data.startswith(b"data: "):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_a_client_that_disconnects_mid_stream_frees_its_slot(refserver_factory):
    server = refserver_factory("--slots", "1", "--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))
    long_id, errored_id, next_id = (f"slots-{uuid.uuid4().hex[:8]}-{k}" for k in ("long", "500", "next"))
    payload = json.dumps(body(long_id, max_tokens=1000)).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: refserver\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
        )
        read_first_event(sock)
        # while the long stream holds the only slot, an error answer without a stream takes none and waits for none
        response = requests.post(server.url + "/v1/completions", json=body(errored_id, fault="http_500"), timeout=30)
        assert response.status_code == 500
    finally:
        sock.close()
    stream_fully(server.url, next_id)
    first, errored, nxt = (server.stream_log(i) for i in (long_id, errored_id, next_id))
    assert errored["t_slot"] is None and errored["complete"]
    assert not first["complete"]
    assert sum(tokens for _, tokens, _ in first["chunks"]) < 1000
    # the second stream got the slot when the first one's client went away, long before its 1000 tokens were due
    scheduled_end = first["t_slot"] + TTFT_S + 999 * GAP_S
    assert end(first) <= nxt["t_slot"] < scheduled_end
    assert nxt["complete"] and first_token(nxt) >= nxt["t_recv"] + TTFT_S


def test_slots_are_handed_over_in_arrival_order_and_a_killed_waiter_leaves_the_queue():
    slots, order = _Slots(1), []

    def user(name: str, hold_s: float) -> None:
        slots.acquire()
        try:
            order.append(name)
            gevent.sleep(hold_s)
        finally:
            slots.release()

    holder = gevent.spawn(user, "a", 0.05)
    gevent.sleep(0)
    waiters = {name: gevent.spawn(user, name, 0) for name in "bcd"}
    gevent.sleep(0.01)
    waiters["c"].kill()  # gone while queued: it must neither take nor keep a slot
    gevent.joinall([holder, *waiters.values()], timeout=10)
    late = gevent.spawn(user, "e", 0)  # a newcomer after the queue drained gets the slot at once
    late.join(10)
    assert order == ["a", "b", "d", "e"]
    assert slots.active == 0 and not slots.waiting


def test_negative_slots_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        refserver_cli.main(["--slots", "-1", "--port", "0"])
    assert exc.value.code == 2
    assert "--slots" in capsys.readouterr().err
