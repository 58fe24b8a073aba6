"""Locust's web UI as the experiment's cockpit.

* The start form: the scenario is a choice (``webform.allowed_scenarios``), every field shows the scenario's
  value, and a submitted form is checked before anything starts (the command line's messages, shown in the
  form by Locust's own alert).
* ``cockpit.js`` (served from here, added to Locust's page; nothing is loaded from anywhere else) replaces the
  users/ramp-up fields with a sentence about the plan, turns the variant field into checkboxes, reloads the
  fields when another scenario is chosen, and draws the LLM tab: plan progress, live charts, warnings, and
  after the run the verdict, the exit code and the run's files.
* Routes: ``/llm/form``, ``/llm/live``, ``/llm/verdict``, ``/llm/rows``, ``/llm/report``, ``/llm/files/<name>``.
* Not an open door: the UI listens on 127.0.0.1 unless ``--web-host`` says otherwise; a request to ``/swarm``,
  ``/stop`` or ``/llm/*`` that a page of another origin sent (its ``Origin`` header) is refused, and their answers
  carry no CORS permission for another origin (Locust's own CORS reflects any); the file route serves only regular
  files in the run directory, read without following a symbolic link.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from flask import Response, jsonify, request

from ..report import verdict_css
from ..rundir import layout
from ..scenario import ScenarioError
from .cockpit import live_view, run_files, verdict_view
from .webform import CHOICES, allowed_scenarios, check_form, check_web_scenario, form_values, options_for

log = logging.getLogger(__name__)

__all__ = ["install", "read_regular_file"]

COLUMNS = [
    ("variant", "Variant"),
    ("level", "Level"),
    ("requests", "Requests"),
    ("errors", "Errors"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_from", "TTFT from"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("tpot_p95_ms", "TPOT p95 ms"),
    ("output_tps", "Output tok/s (10 s)"),
    ("acceptance", "Acceptance (client)"),
    ("client", "Client"),
]
ASSETS = ("cockpit.js", "cockpit.css")
PAGE_HOOK = "</body>"  # after Locust's own script that sets window.templateArgs
# Run files as text in the browser; anything else (Parquet) is a download. Never served as HTML but the report.
TEXT_SUFFIXES = (".json", ".md", ".csv", ".log", ".txt")
LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def install(environment, last_experiment: Callable, cli_scenario: Callable[[], str]) -> None:
    """``last_experiment()`` gives the run in progress or the last one (None before the first run)."""
    web_ui = environment.web_ui
    if web_ui is None:
        return
    app = web_ui.app
    if not environment.parsed_options.web_host:  # Locust's default binds every interface; '*' asks for that
        web_ui.host = LOOPBACK
        log.info(
            "the web UI listens on %s only; to reach it from elsewhere pass --web-host 0.0.0.0 (and --web-login)",
            LOOPBACK,
        )

    _refuse_other_origins(app, web_ui)
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": "llm"}]
    web_ui.template_args["extended_tables"] = [
        {"key": "llm", "structure": [{"key": key, "title": title} for key, title in COLUMNS]}
    ]
    web_ui.template_args["extended_csv_files"] = [{"href": "/llm/report", "title": "LLM report (HTML)"}]
    _shape_the_form(web_ui, environment, cli_scenario)

    def rows() -> list[dict]:
        experiment = last_experiment()
        return experiment.recorder.live.rows() if experiment is not None else []

    def run_dir() -> Path | None:
        experiment = last_experiment()
        return experiment.run.path if experiment is not None else None

    _check_started_forms(app, environment, cli_scenario)
    _extend_locust_pages(app, rows)

    def route(path: str):
        return lambda view: app.route(path, endpoint=f"llm_{view.__name__}")(web_ui.auth_required_if_enabled(view))

    @route("/llm/static/<name>")
    def static(name: str):
        if name not in ASSETS:
            return Response("not found", status=404, mimetype="text/plain")
        text = resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")
        if name.endswith(".css"):
            text += verdict_css()
        return Response(text, mimetype="text/css" if name.endswith(".css") else "text/javascript")

    @route("/llm/form")
    def form():
        """The fields for the scenario chosen in the form (``?scenario=``)."""
        chosen = request.args.get("scenario", "")
        try:
            check_web_scenario(chosen, cli_scenario())
            values = form_values(options_for(chosen, environment.parsed_options, cli_scenario()), environment.host)
        except ScenarioError as exc:
            return jsonify({"error": str(exc)}), 400
        return jsonify(values)

    @route("/llm/live")
    def live():
        return jsonify(live_view(last_experiment()))

    @route("/llm/verdict")
    def verdict():
        view = verdict_view(last_experiment())
        return jsonify(view) if view else (jsonify({"error": "no run has ended yet"}), 404)

    @route("/llm/rows")
    def llm_rows():
        report = run_dir() and run_dir() / layout.REPORT
        return {"rows": rows(), "report": "/llm/report" if report and report.exists() else None}

    @route("/llm/report")
    def report():
        path = run_dir() and run_dir() / layout.REPORT
        if not path or not path.exists():
            return Response("no report yet: it is written when a run stops", status=404, mimetype="text/plain")
        return Response(path.read_bytes(), mimetype="text/html")

    @route("/llm/files/<name>")
    def run_file(name: str):
        folder = run_dir()
        # Only a name the listing shows: nothing outside the run directory can be asked for.
        if folder is None or name not in run_files(folder):
            return Response("no such file in the run directory", status=404, mimetype="text/plain")
        if name == layout.REPORT:
            return report()
        return _file_response(folder, name)


def _check_started_forms(app, environment, cli_scenario: Callable[[], str]) -> None:
    """Refuses a submitted start form whose values the command line would refuse, with its message."""

    @app.before_request
    def check_the_form():
        # Locust starts the shape whatever the form says; a bad value must stop here, with the command line's words.
        if request.method == "POST" and request.path.endswith("/swarm"):
            why = check_form(environment.parsed_options, request.form, environment.host, cli_scenario())
            if why:
                log.error("the web form was not started: %s", why)
                return jsonify({"success": False, "message": why, "host": environment.host})
        return None


def _file_response(folder: Path, name: str) -> Response:
    """A run file as text in the browser, or as a download; 404 unless it is a regular file."""
    data = read_regular_file(folder / name)
    if data is None:
        return Response("no such file in the run directory", status=404, mimetype="text/plain")
    if name.endswith(TEXT_SUFFIXES):
        response = Response(data, mimetype="text/plain")
        response.charset = "utf-8"
    else:
        response = Response(data, mimetype="application/octet-stream")
        response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _refuse_other_origins(app, web_ui) -> None:
    """Refuses a request to a guarded route (start, stop, ``/llm/*``) that a page of another origin sent."""

    @app.before_request
    def same_origin_only():
        # Runs before every other check: a page elsewhere must not start a run, stop one or read its files.
        if not _guarded(request.path):
            return None
        origin = request.headers.get("Origin")
        own = request.host_url.rstrip("/")
        # A browser says where a request comes from: Origin (not on a plain GET) and Sec-Fetch-Site (on every
        # request; "same-site" is another port of the same host). A name other than loopback's on a loopback-only
        # UI is a page that rebound its own name to 127.0.0.1.
        elsewhere = request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site")
        rebound = web_ui.host == LOOPBACK and (request.host.rsplit(":", 1)[0] not in LOOPBACK_NAMES)
        if (origin is not None and origin != own) or elsewhere or rebound:
            log.warning(
                "refused a cross-origin %s %s (Origin %s, Host %s)", request.method, request.path, origin, request.host
            )
            return Response("cross-origin requests to the cockpit are refused", status=403, mimetype="text/plain")
        return None


def _extend_locust_pages(app, rows: Callable[[], list[dict]]) -> None:
    """Adds the LLM table's rows to Locust's stats, the cockpit's assets to its page, and the UI's own origin as the
    only CORS permission of the guarded routes."""

    @app.after_request
    def extend_locust_pages(response):
        if _guarded(request.path):
            # Set here, Locust's CORS (which reflects any Origin) leaves it: only the UI's own origin may read these.
            response.headers["Access-Control-Allow-Origin"] = request.host_url.rstrip("/")
            response.headers["Vary"] = "Origin"
        if request.path.endswith("/stats/requests") and response.is_json:
            # The stock UI polls /stats/requests; its extended_stats feed the LLM tab's table.
            data = response.get_json()
            data["extended_stats"] = [{"key": "llm", "data": rows()}]
            response.set_data(json.dumps(data))
        elif (
            (request.endpoint or "").endswith("index")
            and response.mimetype == "text/html"
            and not response.direct_passthrough
        ):  # Locust's page, not its downloadable report
            page = response.get_data(as_text=True)
            if PAGE_HOOK in page:
                response.set_data(
                    page.replace(
                        PAGE_HOOK,
                        '<link rel="stylesheet" href="/llm/static/cockpit.css">'
                        '<script src="/llm/static/cockpit.js"></script>' + PAGE_HOOK,
                        1,
                    )
                )
        return response


def _guarded(path: str) -> bool:
    return path.endswith(("/swarm", "/stop")) or "/llm/" in path


def read_regular_file(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file itself (not a symbolic link, a FIFO or a device), else None;
    checked on the opened file, so a link put in its place meanwhile is not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _shape_the_form(web_ui, environment, cli_scenario: Callable[[], str]) -> None:
    """Each time Locust renders its page: the scenario as a choice, and every field at the scenario's value."""
    update = web_ui.update_template_args

    def update_with_scenario() -> None:
        update()
        extra = web_ui.template_args.get("extra_options") or {}
        if "scenario" in extra:
            extra["scenario"]["choices"] = allowed_scenarios(cli_scenario())
        for name, choices in CHOICES.items():
            if name in extra:
                extra[name]["choices"] = choices
        try:
            values = form_values(environment.parsed_options, environment.host)
        except ScenarioError as exc:  # the form shows what was given; starting it shows the error
            web_ui.template_args["llm_form"] = {"error": str(exc)}
            return
        for name, value in values["fields"].items():
            if name in extra:
                extra[name]["default_value"] = value
        web_ui.template_args["llm_form"] = values

    web_ui.update_template_args = update_with_scenario
