"""The package's shape: no import cycle between modules or between packages, and the pure layers never reach Locust.

Static, from the source: a module's imports are read with ``ast`` (function-local imports included), and
the package-internal graph is followed transitively.

Size is a target, not a test: a module holds one topic in a few hundred lines (about 400, ruff-formatted); one
that grows well past that usually holds two topics, and is split by topic, never by size alone. What is enforced
is the complexity of a function: ruff's mccabe rule (C90, ``max-complexity = 20`` in pyproject.toml), which CI
runs before the tests.
"""

import ast
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "locust_llm"
PURE = (
    "locust_llm.analysis",
    "locust_llm.report",
    "locust_llm.rundir",
    "locust_llm.workload",
    "locust_llm.pipeline",
    "locust_llm.fmt",
    "locust_llm.records",
    "locust_llm.scenario",
    "locust_llm.client.engines",
    "locust_llm.client.accounting",
    "locust_llm.servers",
    "locust_llm.host",
    "locust_llm.refserver.config",  # what a stream will be, computed without the gevent server
)  # the host scanner runs as a process of its own, unpatched
FORBIDDEN = ("locust", "gevent", "flask", "requests", "urllib3", "sseclient", "geventhttpclient")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        edges[name] = {i for i in imports_of(path) if i in modules or i.split(".")[0] in FORBIDDEN}
        # importing a.b.c runs a/__init__ and a/b/__init__ too
        edges[name] |= {
            ".".join(i.split(".")[:k])
            for i in list(edges[name])
            for k in range(2, i.count(".") + 1)
            if ".".join(i.split(".")[:k]) in modules
        }
    return edges


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for nxt in edges.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_pure_layers_never_import_locust_or_http_clients():
    edges = graph()
    for name in edges:
        if name.startswith(PURE):
            leaks = {m for m in reachable(edges, name) if m.split(".")[0] in FORBIDDEN}
            assert not leaks, f"{name} reaches {sorted(leaks)}"


def test_no_import_cycle():
    # A module inside a package is run by that package's __init__ (which may re-export it): not a cycle.
    edges = {
        k: {v for v in vs if v.startswith("locust_llm") and not k.startswith(v + ".")} for k, vs in graph().items()
    }
    for name in edges:
        cycle = [nxt for nxt in edges[name] if nxt != name and name in reachable(edges, nxt)]
        assert not cycle, f"{name} -> {cycle[0]} -> ... -> {name}"


PACKAGES = {module_name(p) for p in PACKAGE.rglob("__init__.py")}


def package_of(module: str) -> str:
    """The package a module belongs to: ``locust_llm.analysis.rates`` -> ``locust_llm.analysis``, and a sub-package
    is a package of its own (``locust_llm.analysis.documents.summary`` -> ``locust_llm.analysis.documents``); a
    top-level module is a package of its own."""
    if module in PACKAGES:
        return module
    parent = module.rsplit(".", 1)[0]
    return module if parent == "locust_llm" else parent


def test_no_package_cycle():
    # Between packages the arrows go one way (rundir <- analysis.documents <- analysis <- report <- pipeline <-
    # runtime ...): two that import each other, directly or through a chain of others, are one topic split in two,
    # or a layer reaching up. Importing a sub-package runs its parents' __init__: that is not an arrow up.
    edges: dict[str, set[str]] = {}
    for name, imported in graph().items():
        for other in imported:
            if not other.startswith("locust_llm.") or name.startswith(other + "."):
                continue
            if package_of(other) != package_of(name):
                edges.setdefault(package_of(name), set()).add(package_of(other))
    assert "locust_llm.analysis" in edges["locust_llm.report"]  # sub-packages are seen, their parents too
    assert "locust_llm.analysis.documents" in edges["locust_llm.analysis"]
    for package in edges:
        cycle = [nxt for nxt in edges[package] if package in reachable(edges, nxt)]
        assert not cycle, f"{package} -> {cycle[0]} -> ... -> {package}"
