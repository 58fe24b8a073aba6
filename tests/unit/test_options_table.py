"""Every plugin option is where a user looks: the table of docs/options.md is the options the plugin registers on
Locust's parser (all of them, with their help), and ``locust-llm options`` prints each."""

from locust.argument_parser import LocustArgumentParser

from locust_llm.cli import main
from locust_llm.runtime import plugin
from locust_llm.runtime.options import OPTIONS, options_markdown
from tests.helpers import REPO


def registered() -> dict[str, str]:
    """The plugin's options as Locust's parser holds them: flag -> help."""
    parser = LocustArgumentParser()
    before = {a.dest for a in parser._actions}
    plugin.add_arguments(parser)
    return {a.option_strings[0]: a.help for a in parser._actions if a.dest not in before}


def table_rows(text: str) -> dict[str, str]:
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| `--")]
    return {row[0].removeprefix("| ").strip("`"): row[-1].removesuffix(" |") for row in rows}


def test_the_docs_table_is_every_registered_option_with_its_help():
    page = (REPO / "docs" / "options.md").read_text()
    assert options_markdown() in page, "docs/options.md is stale: paste `locust-llm options --markdown` into it"
    rows, options = table_rows(page), registered()
    assert len(options) == len(OPTIONS) >= 28
    assert rows == {flag: text.replace("|", "/") for flag, text in options.items()}


def test_locust_llm_options_prints_every_option(capsys):
    assert main(["options"]) == 0
    printed = capsys.readouterr().out
    for flag, text in registered().items():
        assert f"  {flag}" in printed and text in printed, flag
