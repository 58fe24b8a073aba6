"""Log records are masked as they are made, so no handler (console, --logfile, the web UI's /logs) sees a
password from ``--host`` or a known key, in a message, its arguments or a traceback."""

import io
import logging

import pytest

from locust_llm.rundir.redact import mask_log_records, remember

URL = "http://alice:S3cretPass@127.0.0.1:9/metrics"


@pytest.fixture
def masked_log():
    factory = logging.getLogRecordFactory()
    mask_log_records()
    stream, logger = io.StringIO(), logging.getLogger("locust_llm.tests.masking")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)
        logging.setLogRecordFactory(factory)


def test_a_password_in_a_url_never_reaches_a_log_handler(masked_log):
    logger, stream = masked_log
    remember("sk-fake-log-key-91")
    logger.warning("telemetry: %s/%s failed (%s); recording a gap", "ref", "scrape", f"{URL} unreachable")
    logger.warning("key sk-fake-log-key-91 refused")
    try:
        raise ConnectionError(f"cannot reach {URL}")
    except ConnectionError:
        logger.exception("start-up failed")
    text = stream.getvalue()
    assert "S3cretPass" not in text and "sk-fake-log-key-91" not in text
    assert text.count("http://alice:***@127.0.0.1:9/metrics") == 2 and "key *** refused" in text
    assert "Traceback" in text and "ConnectionError" in text


def test_ordinary_messages_are_formatted_as_before(masked_log):
    logger, stream = masked_log
    logger.info("ignored below WARNING %s", URL)
    logger.warning("%d%% of %s requests failed at http://127.0.0.1:8000", 5, "ref")
    assert stream.getvalue() == "5% of ref requests failed at http://127.0.0.1:8000\n"


def test_installing_it_twice_wraps_once(masked_log):
    first = logging.getLogRecordFactory()
    mask_log_records()
    assert logging.getLogRecordFactory() is first and first.masks_secrets
