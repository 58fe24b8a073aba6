"""Records whose tokens a tokenizer still counts (perhaps the server's own ``/tokenize``) wait for a pause in the
load: a window that begins in the middle of a backlog stops the counting at once, the streams a window sent hold it
until their last chunk, and stopping the load finishes it."""

from locust_llm.records import Phase, RequestRecord
from locust_llm.runtime.shipper import RecordShipper


class Runner:
    user_count = 0

    def __init__(self):
        self.batches: list[dict] = []

    def send_message(self, kind, data):
        self.batches.append(data)


def test_a_window_that_begins_mid_backlog_stops_the_counting_and_stopping_the_load_finishes_it():
    window = {"open": False}
    shipper = RecordShipper(Runner(), worker=0, measuring=lambda: window["open"])
    counted: list[int] = []

    def count(i: int) -> None:
        counted.append(i)
        if i == 2:  # the next step's window begins while the third record is counted
            window["open"] = True

    for i in range(6):
        record = RequestRecord(request_id=f"r{i}", phase=Phase.STEADY)
        shipper.add_after(record, lambda i=i: count(i))
    checked: list[str] = []
    shipper.check_later("r0", lambda: checked.append("r0"))
    shipper.refine()
    assert counted == [0, 1, 2] and len(shipper.deferred) == 3 and not checked
    shipper.refine()  # still inside the window: nothing more
    assert counted == [0, 1, 2]
    shipper.stop()  # the load stopped while the window was open: everything is counted and shipped
    assert counted == list(range(6)) and checked == ["r0"]
    assert shipper.runner.batches[-1]["sent_total"] == 6


def test_the_counting_waits_for_the_last_chunk_of_a_window_s_streams_not_only_for_its_end():
    shipper = RecordShipper(Runner(), worker=0, measuring=lambda: False)  # the window has just closed
    counted: list[str] = []
    shipper.add_after(RequestRecord(request_id="done"), lambda: counted.append("done"))
    late = RequestRecord(request_id="late", phase=Phase.STEADY)
    warm = RequestRecord(request_id="warm", phase=Phase.WARMUP)
    with shipper.measured_stream(late), shipper.measured_stream(warm):  # sent in the window, still arriving
        shipper.refine()
        assert counted == []
    shipper.refine()
    assert counted == ["done"]
    with shipper.measured_stream(warm):  # never measured: no hold
        shipper.add_after(RequestRecord(request_id="next"), lambda: counted.append("next"))
        shipper.refine()
    assert counted == ["done", "next"]
