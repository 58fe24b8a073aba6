"""Locust's web UI as the experiment's cockpit.

* The start form: the scenario is a choice (``webform.allowed_scenarios``), every field shows the scenario's
  value, and a submitted form is checked before anything starts (the command line's messages, shown in the
  form by Locust's own alert).
* ``cockpit.js`` (served from here, added to Locust's page; nothing is loaded from anywhere else) replaces the
  users/ramp-up fields with a sentence about the plan, turns the variant field into checkboxes, reloads the
  fields when another scenario is chosen, and draws the LLM tab: plan progress, live charts, warnings, and
  after the run the verdict, the exit code and the run's files.
* Routes: ``/llm/form``, ``/llm/live``, ``/llm/verdict``, ``/llm/rows``, ``/llm/report``, ``/llm/files/<name>``.
* Not an open door: the UI listens on 127.0.0.1 unless ``--web-host`` says otherwise; a request to any route, the
  plugin's and Locust's own (``/stats/requests``, ``/logs``, ``/stats/reset``, ...), that a page of another origin
  sent (its ``Origin`` or ``Sec-Fetch-Site`` header) is refused with 403, but for a plain link followed to a page
  (a top-level GET); so is one whose ``Host`` is not loopback's on a loopback UI (a rebound name). Answers carry no
  CORS permission for another origin (Locust's own CORS reflects any). Refusals are logged at most once per
  ``REFUSALS_SAID_S`` with their count, so a page looping on them costs the event loop next to nothing. The file
  route serves only regular files in the run directory, read without following a symbolic link.
* A start while a run is under way is refused in the form, with the run it would disturb; Stop pressed during a
  run is recorded like SIGTERM (an ``interrupted`` event naming the window it cut; the verdict a stopped run's).
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from flask import Response, request

from ..report import verdict_css
from ..rundir import layout
from ..scenario import ScenarioError
from .cockpit import live_view, run_files, verdict_view
from .webform import CHOICES, allowed_scenarios, check_form, check_web_scenario, form_values, options_for

log = logging.getLogger(__name__)

__all__ = ["finite", "install", "read_regular_file", "strict_json"]

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
REFUSALS_SAID_S = 10.0
STOPPED_FROM_THE_UI = "the web UI's Stop button"


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

    _check_started_forms(app, environment, cli_scenario, last_experiment)
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
            return strict_json({"error": str(exc)}, 400)
        return strict_json(values)

    @route("/llm/live")
    def live():
        return strict_json(live_view(last_experiment()))

    @route("/llm/verdict")
    def verdict():
        view = verdict_view(last_experiment())
        return strict_json(view) if view else strict_json({"error": "no run has ended yet"}, 404)

    @route("/llm/rows")
    def llm_rows():
        report = run_dir() and run_dir() / layout.REPORT
        return strict_json({"rows": rows(), "report": "/llm/report" if report and report.exists() else None})

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


def _check_started_forms(app, environment, cli_scenario: Callable[[], str], last_experiment: Callable) -> None:
    """Refuses a submitted start form whose values the command line would refuse, with its message, or that would
    start a run while one is under way; records Stop pressed during a run as its interruption."""

    @app.before_request
    def check_the_form():
        experiment = last_experiment()
        running = experiment is not None and not experiment.finished
        if request.path.endswith("/stop") and running:
            experiment.interrupt(STOPPED_FROM_THE_UI)  # the event, the cut window and the verdict, as SIGTERM
            return None
        # Locust starts the shape whatever the form says; a bad value must stop here, with the command line's words.
        if request.method == "POST" and request.path.endswith("/swarm"):
            if running or getattr(environment.runner, "shape_greenlet", None) is not None:
                where = f"run {experiment.run.run_id}, {experiment.moment()}" if running else "its set-up"
                why = f"a run is under way ({where}): press Stop first, or wait until it ends"
            else:
                why = check_form(environment.parsed_options, request.form, environment.host, cli_scenario())
            if why:
                log.error("the web form was not started: %s", why)
                return strict_json({"success": False, "message": why, "host": environment.host})
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
    """Refuses a request to any route that a page of another origin sent, or that came under a rebound name."""
    said = {"at": 0.0, "unsaid": 0}

    @app.before_request
    def same_origin_only():
        # Runs before every other check: a page elsewhere must not start a run, stop one or read anything.
        origin = request.headers.get("Origin")
        own = request.host_url.rstrip("/")
        # A browser says where a request comes from: Origin (not on a plain GET) and Sec-Fetch-Site (on every
        # request; "same-site" is another port of the same host). A link followed to a page (a top-level GET) may
        # come from anywhere: the page shows in the user's own tab, unread by the one that linked it. A name other
        # than loopback's on a loopback-only UI is a page that rebound its own name to 127.0.0.1.
        navigation = request.method == "GET" and request.headers.get("Sec-Fetch-Mode") == "navigate"
        elsewhere = request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site") and not navigation
        rebound = web_ui.host == LOOPBACK and (request.host.rsplit(":", 1)[0] not in LOOPBACK_NAMES)
        if (origin is not None and origin != own) or elsewhere or rebound:
            said["unsaid"] += 1
            if time.monotonic() - said["at"] >= REFUSALS_SAID_S:  # a page looping on refusals: said, not replayed
                log.warning(
                    "refused %d cross-origin request(s) (said at most every %gs), the last %s %s (Origin %s, Host %s)",
                    said["unsaid"],
                    REFUSALS_SAID_S,
                    request.method,
                    request.path[:200],
                    (origin or "")[:200],
                    request.host[:200],
                )
                said["at"], said["unsaid"] = time.monotonic(), 0
            return Response("cross-origin requests to the cockpit are refused", status=403, mimetype="text/plain")
        return None


def _extend_locust_pages(app, rows: Callable[[], list[dict]]) -> None:
    """Adds the LLM table's rows to Locust's stats, the cockpit's assets to its page, and the UI's own origin as the
    only CORS permission of the guarded routes."""

    @app.after_request
    def extend_locust_pages(response):
        # Set here, Locust's CORS (which reflects any Origin) leaves it: only the UI's own origin may read an answer.
        response.headers["Access-Control-Allow-Origin"] = request.host_url.rstrip("/")
        response.headers["Vary"] = "Origin"
        if request.path.endswith("/stats/requests") and response.is_json:
            # The stock UI polls /stats/requests; its extended_stats feed the LLM tab's table.
            data = response.get_json()
            data["extended_stats"] = [{"key": "llm", "data": rows()}]
            response.set_data(json.dumps(finite(data), allow_nan=False))
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


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity as None: JSON has no NaN, and a browser's parser refuses the answer."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def strict_json(value: Any, status: int = 200) -> Response:
    """Strict JSON (null, never NaN) that any parser reads."""
    return Response(json.dumps(finite(value), allow_nan=False, default=str), status=status, mimetype="application/json")


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
