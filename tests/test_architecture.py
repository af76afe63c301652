"""The package's structure (docs/architecture.md), checked on its source: module and
function sizes, no import cycles, the layers, no reaching into another module's private
members, and ``__all__`` lists that are true."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_sqlstore

SRC = Path(adk_sqlstore.__file__).parent
README = Path(__file__).parent.parent / "README.md"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

# Lower layers never import higher ones (a module may import its own layer).
LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundations",
        [
            "errors",
            "settings",
            "urls",
            "url_display",
            "url_parameters",
            "suggestions",
            "models",
            "state",
            "validation",
            "telemetry",
            "console",
            "schema",
            "search.text",
            "search.analysis",
            "embeddings",
        ],
    ),
    ("statements and engines", ["sql", "drivers", "engine", "failures"]),
    ("the store", ["migration", "store"]),
    ("search", ["search"]),
    ("sessions", ["sessions"]),
    ("memory", ["memory", "artifacts", "generation"]),
    (
        "integrations",
        ["adk", "cli", "inspector", "demo", "demo_facts", "_entry", "__main__", "__init__"],
    ),
]

# Private names of other libraries this package may use, and why.
FOREIGN_PRIVATE = {
    "_storage_update_marker": "ADK's Session attribute for a storage service's token",
    "_mapping": "SQLAlchemy's documented mapping view of a Row",
    "_proxied": "SQLAlchemy: the engine an engine with execution options wraps",
    "_max_overflow": "SQLAlchemy's QueuePool: reported in the pool-timeout message",
    "_stream_broken": "asyncmy: set when the server closed the connection (checked at checkout)",
    "_getframe": "sys._getframe: the module calling a core service (refused when it is ADK's)",
}


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"
        yield name, path, ast.parse(path.read_text(encoding="utf-8"))


MODULES = list(_modules())
NAMES = {name for name, _, _ in MODULES}


def _layer(module: str) -> int:
    best = (-1, -1)  # (length of the matching prefix, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), index))
    assert best[1] >= 0, f"{module} is in no layer of tests/test_architecture.py"
    return best[1]


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The package modules a ``from ... import`` names (submodules included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        base = package.split(".") if package and package != "__init__" else []
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = ".".join([*base, *([node.module] if node.module else [])])
    elif node.module and node.module.startswith("adk_sqlstore"):
        target = node.module.removeprefix("adk_sqlstore").lstrip(".")
    else:
        return []
    found = []
    for alias in node.names:
        sub = f"{target}.{alias.name}" if target else alias.name
        if sub in NAMES:
            found.append(sub)
        elif target in NAMES:
            found.append(target)
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers inside ``if TYPE_CHECKING:`` blocks (imports for annotations)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(typing: bool = False) -> dict[str, set[str]]:
    """Which modules each imports (``typing``: those under ``TYPE_CHECKING`` too)."""
    graph: dict[str, set[str]] = {name: set() for name in NAMES}
    for module, path, tree in MODULES:
        typing_only = set() if typing else _type_checking_only(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.lineno not in typing_only:
                graph[module].update(t for t in _resolve(module, path, node) if t != module)
    return graph


def test_a_generation_run_reads_in_one_direction() -> None:
    """Issue 38: a run's plan and its write are steps in one direction: no module of
    the generation package imports one that imports it back, even for annotations
    (running.py and writing.py did)."""
    graph = _imports(typing=True)
    package = {name for name in graph if name.startswith("generation.")}
    back = sorted(
        (a, b) for a in package for b in graph[a] & package if a in _reachable(graph, b, package)
    )
    assert back == []
    assert "generation.writing" in graph["generation.running"]


def _reachable(graph: dict[str, set[str]], start: str, within: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for other in graph[todo.pop()] & within:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def test_no_module_is_over_500_lines() -> None:
    long = {
        name: n
        for name, path, _ in MODULES
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = {
        f"{name}.{node.name}": n
        for name, _, tree in MODULES
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_no_import_cycle() -> None:
    graph = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = sorted(
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in _imports().items()
        for target in targets
        if _layer(target) > _layer(module)
    )
    assert upward == []


def test_the_checks_see_the_imports() -> None:
    """The graph the two tests above read is not empty or blind to relative imports."""
    graph = _imports()
    assert "store" in graph["sessions.service"]
    assert "sql.sessions" in graph["sessions.service"]
    assert "sessions.codec" in graph["memory.ingestion"]
    assert _layer("search.text") == 0 and _layer("search.lexical") == 3


def _private_definitions() -> dict[str, set[str]]:
    """Private names (``_x``) each module defines on its classes and objects."""
    defined: dict[str, set[str]] = {}
    for module, _, tree in MODULES:
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = node.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = node.attr
            if name and name.startswith("_") and not name.startswith("__"):
                defined.setdefault(name, set()).add(module)
    return defined


def test_no_module_reaches_into_another_modules_private_members() -> None:
    defined = _private_definitions()
    crossings = []
    for module, _, tree in MODULES:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "service")
            ):
                continue
            owners = defined.get(node.attr, set())
            if node.attr in FOREIGN_PRIVATE and not owners:
                continue
            if module not in owners:
                crossings.append(f"{module}:{node.lineno}: .{node.attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and alias.name != "_google":  # adk's own private module
                        crossings.append(f"{module}:{node.lineno}: imports {alias.name}")
    assert crossings == []


@pytest.mark.parametrize("module", sorted(NAMES - {"__main__"}))
def test_all_names_what_the_module_defines(module: str) -> None:
    if module.startswith("adk") or module == "cli.import_adk":
        pytest.importorskip("google.adk")
    if module.startswith("inspector"):
        pytest.importorskip("jinja2", reason="the inspector needs the inspector extra")
        pytest.importorskip("starlette", reason="the inspector needs the inspector extra")
    name = "adk_sqlstore" if module == "__init__" else f"adk_sqlstore.{module}"
    loaded = importlib.import_module(name)
    exported = getattr(loaded, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert sorted(exported) == sorted(set(exported)), f"{name}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(loaded, n)]
    assert missing == [], f"{name}.__all__ names what it does not define"
    tree = next(t for m, _, t in MODULES if m == module)
    public = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
    }
    if module not in ("__init__",) and not module.startswith("cli."):
        assert public <= set(exported), f"{name} defines public {public - set(exported)}"


def test_the_package_exports_what_the_readme_imports() -> None:
    imported = set()
    for match in re.finditer(r"from adk_sqlstore import ([^\n(]+)", README.read_text()):
        imported |= {n.strip() for n in match.group(1).split(",") if n.strip()}
    assert imported, "the README shows imports from adk_sqlstore"
    assert imported <= set(adk_sqlstore.__all__) | {"telemetry"}
