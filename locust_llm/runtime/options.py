"""The plugin's command-line options, one table: Locust's parser (and so the web form) gets them from here, the
web form's values are converted by their types here, and the tests take their defaults from here.

A default of 0, -1 or empty means "the scenario's value" (said in each help text); any other value is checked
like the scenario's own, so NaN or a negative number is an error, never taken for "unset". ``web=False`` keeps
an option off the web form, because anyone who can reach the UI can fill the form (a report folder or a URL to
query is the command line's decision).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import places

__all__ = [
    "DEFAULT_SCENARIO",
    "OPTIONS",
    "Option",
    "defaults",
    "given",
    "options_markdown",
    "options_text",
    "parse_value",
]

DEFAULT_SCENARIO = str(places.DEFAULT_SCENARIO)  # the project's own, found from any working directory


@dataclass(frozen=True)
class Option:
    flag: str
    default: str | int | float | bool
    help: str
    web: bool = True
    # Several words after the flag (vLLM's ``--goodput ttft:500 tpot:50``); the command line gives a list of them.
    words: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS: list[Option] = [
    Option("--scenario", DEFAULT_SCENARIO, "scenario YAML file"),
    Option(
        "--variant",
        "",
        "variants to run, comma list (default: all, baseline first); one name with --host; or NAME=URL,NAME=URL: "
        "servers already running, one per variant (the first the baseline), measured interleaved and paired",
    ),
    Option("--mode", "", "closed (users) or open (arrival rate); empty: the scenario's"),
    Option("--ladder", "", "comma list: users (closed) or req/s (open); empty: the scenario's"),
    Option("--step-duration", 0.0, "steady window per step, seconds (0: the scenario's)"),
    Option("--warmup", -1.0, "warm-up per step, seconds, excluded (-1: the scenario's)"),
    Option("--repeats", 0, "measure each level this many times per variant (0: the scenario's)"),
    Option(
        "--order",
        "",
        "sequential or interleaved (ABBA blocks per level; default when repeats >= 2); empty: the scenario's",
    ),
    Option(
        "--min-requests",
        -1,
        "completed requests a steady window needs, else the step is insufficient (-1: the scenario's)",
    ),
    Option("--prompt-tokens", 0, "prompt length in tokens (0: the scenario's)"),
    Option(
        "--dataset",
        "",
        "prompts from a JSONL or ShareGPT-style JSON file instead of generated ones (a path; empty: the scenario's)",
        web=False,
    ),
    Option(
        "--max-concurrency",
        0,
        "open loop: requests in flight at most, as vLLM's --max-concurrency (0: the scenario's load.max_inflight)",
    ),
    Option(
        "--at-max-concurrency",
        "",
        "open loop: an arrival over --max-concurrency waits for a slot, its wait counted in its latency from the "
        "intended time (hold, like vLLM) or is recorded as dropped, a failure (drop); empty: the scenario's",
    ),
    Option(
        "--goodput",
        "",
        "goodput SLOs in vLLM's spelling, KEY:MS separated by spaces or commas: ttft, tpot, e2el (and ttfot), e.g. "
        "'ttft:500 tpot:50 e2el:3000'; replaces the scenario's slo section (empty: the scenario's)",
        words=True,
    ),
    Option("--max-tokens", 0, "output length in tokens (0: the scenario's)"),
    Option("--api", "", "completions or chat (empty: the scenario's)"),
    Option("--model", "", "model name to request (default: the server's)"),
    Option("--report-dir", "reports", "where run directories are written", web=False),
    Option("--run-id", "", "run directory name (default: time + scenario)"),
    Option("--overwrite", False, "replace an existing run directory of that name"),
    Option("--slo-ttft-p99-ms", 0.0, "gate: P99 TTFT per step (0: the scenario's)"),
    Option("--slo-tpot-p99-ms", 0.0, "gate: P99 TPOT per step (0: the scenario's)"),
    Option("--slo-error-rate", -1.0, "gate: error rate per step, 0..1 (-1: the scenario's)"),
    Option("--max-regression-pct", -1.0, "gate: worst change vs the baseline run, percent (-1: the scenario's)"),
    Option("--baseline-run", "", "saved baseline run to compare against"),
    Option("--gpu-hour-usd", 0.0, "price of one GPU per hour, USD, for cost per million tokens (0: the scenario's)"),
    Option(
        "--soak",
        "",
        "hold one level of one variant this long (90s, 10m, 2h), reported in windows with trends "
        "and soak gates; empty: the ladder",
    ),
    Option("--soak-level", 0.0, "the level a soak holds (0: the ladder's highest)"),
    Option(
        "--probes",
        False,
        "after each variant's ladder, send the probe suite (empty prompt, prompts at and over "
        "the context, bad parameters, a disconnect, a burst, ...); the scenario's probes: "
        "section sets faults",
    ),
    Option(
        "--scale-out",
        -1,
        "after each variant's ladder, one server against this many (2 or more) at the same "
        "level per server, to measure how capacity scales (0: off; -1: the scenario's)",
    ),
    Option(
        "--scale-out-urls",
        "",
        "comma list: an external server's other replicas for --scale-out (--host is the first)",
        web=False,
    ),
    Option(
        "--prometheus-url",
        "",
        "query this Prometheus for server/GPU metrics (default: scrape /metrics directly)",
        web=False,
    ),
]


def defaults() -> dict:
    """Every option's default, by destination name (what ``parsed_options`` holds when nothing is given)."""
    return {option.dest: option.default for option in OPTIONS}


def given(options, dest: str) -> bool:
    """The option holds a value of its own, not its default ("the scenario's"); NaN always counts as given."""
    default = next(o.default for o in OPTIONS if o.dest == dest)
    return getattr(options, dest, default) != default


def parse_value(option: Option, text: str):
    """A form field's text as the option's type, the way Locust converts it. ``ValueError`` says what argparse
    says about the same text on the command line (``argument --step-duration: invalid float value: 'abc'``):
    argparse names the option and its type's ``__name__`` the same way."""
    kind = type(option.default)
    if kind is bool:
        return text == "true"
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"argument {option.flag}: invalid {kind.__name__} value: {text!r}") from None


# Locust prints ``--help`` before it imports the locustfile, so before the plugin registers these (Locust issue
# #2917): ``locust-llm options`` prints them, and docs/options.md holds the same table.
def _default_text(option: Option) -> str:
    if option.default == DEFAULT_SCENARIO:
        # Relative to the project, so the docs table does not name the machine it was generated on.
        return str(places.DEFAULT_SCENARIO.relative_to(places.PROJECT))
    if isinstance(option.default, bool):
        return "off"
    if option.default == "":
        return "empty"
    return f"{option.default:g}" if isinstance(option.default, float) else str(option.default)


def options_text() -> str:
    """Every plugin option with its default and help, as ``locust-llm options`` prints it."""
    lines = [
        "locust -f locustfiles/spec_decode.py takes Locust's own options (locust --help) and these; Locust's --help "
        "cannot list them (it prints before the plugin is loaded):",
        "",
    ]
    for option in OPTIONS:
        kind = "" if isinstance(option.default, bool) else f" {option.dest.upper()}" + (" ..." if option.words else "")
        form = "" if option.web else " (command line only, not in the web form)"
        lines.append(f"  {option.flag}{kind}  (default: {_default_text(option)}){form}")
        lines.append(f"      {option.help}")
    return "\n".join(lines) + "\n"


def options_markdown() -> str:
    """The table of docs/options.md: every plugin option, its default, whether the web form shows it, its help."""
    rows = ["| option | default | web form | what it does |", "|---|---|---|---|"]
    for option in OPTIONS:
        rows.append(
            f"| `{option.flag}` | {_default_text(option)} | {'yes' if option.web else 'no'} | "
            f"{option.help.replace('|', '/')} |"
        )
    return "\n".join(rows) + "\n"
