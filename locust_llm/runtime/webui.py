"""The LLM tab in Locust's web UI, a JSON route of its rows, and the finished report."""

from __future__ import annotations

import json
from pathlib import Path

from flask import Response, request

COLUMNS = [("variant", "Variant"), ("level", "Level"), ("requests", "Requests"), ("errors", "Errors"),
           ("ttft_p50_ms", "TTFT p50 ms"), ("tpot_p50_ms", "TPOT p50 ms"), ("tpot_p95_ms", "TPOT p95 ms"),
           ("output_tps", "Output tok/s (10 s)"), ("acceptance", "Acceptance (client)"), ("client", "Client")]


def install(environment, rows, report_path) -> None:
    """``rows()`` gives the live rows; ``report_path()`` the latest report.html (or None)."""
    web_ui = environment.web_ui
    if web_ui is None:
        return
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": "llm"}]
    web_ui.template_args["extended_tables"] = [
        {"key": "llm", "structure": [{"key": key, "title": title} for key, title in COLUMNS]}]
    web_ui.template_args["extended_csv_files"] = [{"href": "/llm/report", "title": "LLM report (HTML)"}]

    @web_ui.app.after_request
    def add_llm_rows(response):
        # The stock UI polls /stats/requests; its extended_stats feed the LLM tab.
        if request.path.endswith("/stats/requests") and response.is_json:
            data = response.get_json()
            data["extended_stats"] = [{"key": "llm", "data": rows()}]
            response.set_data(json.dumps(data))
        return response

    @web_ui.app.route("/llm/rows")
    @web_ui.auth_required_if_enabled
    def llm_rows():
        return {"rows": rows(), "report": "/llm/report" if report_path() else None}

    @web_ui.app.route("/llm/report")
    @web_ui.auth_required_if_enabled
    def llm_report():
        path: Path | None = report_path()
        if path is None or not path.exists():
            return Response("no report yet: it is written when a run stops", status=404, mimetype="text/plain")
        return Response(path.read_bytes(), mimetype="text/html")
