"""Facts written once: the docs' tables of exit codes, metric definitions and options say what the code that owns
them says, and every relative link in the README and docs/ leads to a file that exists."""

import re
from pathlib import Path

from locust_llm.analysis.gates import EXIT_MEANINGS, SEVERITY
from locust_llm.report.texts import DEFINITIONS
from locust_llm.runtime.options import OPTIONS
from tests.helpers import REPO

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def table(path: Path, header: str) -> list[list[str]]:
    """The rows of the one Markdown table in ``path`` whose header line starts with ``header``, as cells."""
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) == 1, f"{path.name}: {len(starts)} tables start with {header!r}"
    rows = []
    for line in lines[starts[0] + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_the_exit_code_table_is_the_codes_own():
    rows = table(DOCS / "verdicts-and-gates.md", "| code | meaning |")
    assert {int(row[0]): row[1] for row in rows} == EXIT_MEANINGS
    assert len(rows) == len(EXIT_MEANINGS)  # no code twice
    order = ", ".join(str(code) for code in SEVERITY)
    assert f"Order of severity: {order}." in (DOCS / "verdicts-and-gates.md").read_text()


def test_the_metric_definitions_are_the_reports_own_words():
    rows = table(DOCS / "metrics.md", "| metric | definition |")
    assert [tuple(row) for row in rows] == DEFINITIONS


def test_the_readme_options_say_what_their_help_says():
    rows = table(REPO / "README.md", "| option | what it does |")
    helps = {option.flag: option.help for option in OPTIONS}
    assert rows, "the README lists no option"
    for flag, text in rows:
        flag = flag.strip("`")
        assert flag in helps, f"README lists {flag}, which is no option of the plugin"
        assert text == helps[flag], flag


def links(text: str) -> list[str]:
    """Targets of Markdown links and images, outside code blocks and code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_leads_to_a_file():
    found = 0
    for page in PAGES:
        for target in links(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:: not this test's business
                continue
            assert "#" not in target, f"{page.name}: {target}: link to a page, not an anchor in it"
            assert (page.parent / target).is_file(), f"{page.name}: {target} does not exist"
            found += 1
    assert found >= len(PAGES)  # the index and the README link every page


def test_the_code_cites_pages_that_hold_the_section_it_names():
    # (docs/metrics.md, "Metric definitions") in a comment or docstring: the page exists and says that name.
    cited = 0
    for folder in ("locust_llm", "tests", "benchmarks", "scripts", "locustfiles"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = " ".join(re.sub(r"\n\s*#", " ", path.read_text()).split())  # comments and docstrings as one line
            for page, section in re.findall(r"(docs/[\w-]+\.md)(?:, \"([^\"]+)\")?", text):
                assert (REPO / page).is_file(), f"{path.name} cites {page}, which does not exist"
                if section:
                    words = " ".join((REPO / page).read_text().split())
                    assert section in words, f"{path.name} cites {section!r} in {page}, which does not say it"
                    cited += 1
    assert cited > 0
