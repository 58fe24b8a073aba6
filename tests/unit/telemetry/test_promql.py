"""Label values in PromQL queries are quoted: a ``"`` or ``\\`` in a variant name (``--host`` runs take any
``--variant``) must neither break the queries nor select another variant's series."""

import json
import os

import pytest
from gevent.pywsgi import WSGIServer

from locust_llm.telemetry.maps import map_for
from locust_llm.telemetry.prometheus_server import PrometheusServer, prometheus_binary
from locust_llm.telemetry.sources import PrometheusSource, promql_string
from tests.helpers import REPO

PAGE = (REPO / "tests" / "fixtures" / "metrics" / "vllm-0.txt").read_bytes()
ODD = 'we"ird\\name\n'


def test_label_values_are_escaped_as_promql_strings():
    assert promql_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert PrometheusServer.selector(ODD) == 'locust_llm_variant="we\\"ird\\\\name\\n"'
    query = PrometheusSource._selector(map_for("vllm"), PrometheusServer.selector(ODD))
    assert query.endswith(',locust_llm_variant="we\\"ird\\\\name\\n"}') and query.startswith('{__name__=~"')


def metrics(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4"), ("Connection", "close")])
    return [PAGE]


def test_a_real_prometheus_answers_for_an_oddly_named_variant_only(tmp_path):
    if not prometheus_binary():
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; CI must install Debian's prometheus package (.ci/run)")
        pytest.skip("prometheus not on PATH (Debian: apt-get install prometheus)")
    servers = [WSGIServer(("127.0.0.1", 0), metrics, log=None, error_log=None) for _ in range(2)]
    for server in servers:
        server.start()
    try:
        with PrometheusServer(scrape_interval_s=0.2, log_path=tmp_path / "prometheus.log") as prom:
            prom.add_server(ODD, f"http://127.0.0.1:{servers[0].server_port}")
            prom.add_server("we", f"http://127.0.0.1:{servers[1].server_port}")  # a prefix of the odd name
            assert prom.wait_for_target(ODD, timeout_s=20), prom.log_tail()
            assert prom.wait_for_target("we", timeout_s=20), prom.log_tail()
            source = PrometheusSource(prom.url, map_for("vllm"), prom.selector(ODD), timeout_s=5)
            try:
                rows = source.poll()
            finally:
                source.close()
    finally:
        for server in servers:
            server.stop(timeout=0)
    assert rows
    assert {json.loads(labels)["locust_llm_variant"] for _t, _metric, labels, _value in rows} == {ODD}
