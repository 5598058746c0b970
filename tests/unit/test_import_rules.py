"""The package's import rules, read from its source: no import circles, no private name used outside
its module, and no layer importing a higher one. The layers are the table in docs/architecture.md,
so the page and the code cannot drift apart. The package and the tests stay apart: the package
imports nothing from tests/, and ``local`` holds only the services users run (the list below), each
used by the rest of the package; the services only tests start live in tests/devservices."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "upsert_kafka_ops"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP = "upsert_kafka_ops"


@dataclass(frozen=True)
class Use:
    """One module's use of another: ``names`` taken from it (``from m import a, b``) or reached as
    attributes of a module alias (``m.a``)."""

    source: str
    target: str
    names: tuple[str, ...]
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def uses(module: str, tree: ast.Module, modules: set[str], is_package: bool = False) -> Iterator[Use]:
    """Every use of a module of ``modules`` by ``module`` (imports anywhere: top level, functions,
    ``TYPE_CHECKING`` blocks), with module aliases followed to their attributes."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, is_package)
            if not target.startswith(TOP):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:  # `from pkg import module`
                    aliases[alias.asname or alias.name] = sub
                    yield Use(module, sub, (), node.lineno)
                else:
                    yield Use(module, target, (alias.name,), node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(TOP):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    yield Use(module, alias.name, (), node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            yield Use(module, aliases[node.value.id], (node.attr,), node.lineno)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(all_uses: list[Use]) -> list[str]:
    """Private names taken from another module, and private modules used from outside their package."""
    found = []
    for u in all_uses:
        if u.target == u.source:
            continue
        for name in u.names:
            if _private(name):
                found.append(f"{u.source}:{u.line} uses {u.target}.{name}")
        parts = u.target.split(".")
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            if _private(part) and not (u.source == owner or u.source.startswith(owner + ".")):
                found.append(f"{u.source}:{u.line} uses the private module {u.target}")
    return sorted(set(found))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def read_layers(text: str) -> dict[str, int]:
    """``{unit: layer}`` from the architecture page's layer table: rows ``| N | `unit`, ... | ... |``,
    where a unit is a subpackage or top-level module (``engine``, ``errors``) or ``upsert_kafka_ops``
    itself (its ``__init__``)."""
    layers: dict[str, int] = {}
    for match in re.finditer(r"^\| (\d+) \| ([^|]+) \|", text, re.M):
        for unit in re.findall(r"`([\w.]+)`", match.group(2)):
            assert unit not in layers, f"{unit} is in two layers of the table"
            layers[unit] = int(match.group(1))
    return layers


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else TOP


def layer_breaches(all_uses: list[Use], layers: dict[str, int]) -> list[str]:
    found = []
    for u in all_uses:
        src, dst = unit_of(u.source), unit_of(u.target)
        if src != dst and layers[dst] > layers[src]:
            found.append(
                f"{u.source}:{u.line} (layer {layers[src]}) imports {u.target} (layer {layers[dst]})"
            )
    return sorted(set(found))


def package_uses() -> tuple[dict[str, Path], list[Use]]:
    modules = package_modules()
    names = set(modules)
    all_uses = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        all_uses += list(uses(name, tree, names, is_package=path.name == "__init__.py"))
    return modules, all_uses


# -- the rules, on the package ----------------------------------------------------------------------
def test_the_package_has_no_import_circles() -> None:
    modules, all_uses = package_uses()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for u in all_uses:
        if u.target in modules and u.target != u.source:
            graph[u.source].add(u.target)
    assert circles(graph) == []


def test_no_private_name_is_used_outside_its_module() -> None:
    _, all_uses = package_uses()
    assert private_uses(all_uses) == []


def test_tests_and_examples_use_no_private_name_of_the_package() -> None:
    names = set(package_modules())
    all_uses = []
    for folder in ("tests", "benchmarks", "dags", "dagster_defs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            all_uses += list(uses(str(path.relative_to(ROOT)), tree, names))
    assert private_uses(all_uses) == []


def test_no_layer_imports_a_higher_one() -> None:
    modules, all_uses = package_uses()
    layers = read_layers(ARCHITECTURE.read_text())
    units = {unit_of(m) for m in modules}
    assert sorted(units - set(layers)) == [], "add these to the layer table of docs/architecture.md"
    assert sorted(set(layers) - units) == [], "the layer table names what the package does not have"
    assert layer_breaches(all_uses, layers) == []


#: what ``upsert_kafka_ops.local`` holds: the services users run (``local kafka|postgres|registry``, the
#: ``spark-connect`` server the chart starts, the demo's broker) and what they need. A service only the
#: tests start belongs in tests/devservices, outside the installed package.
LOCAL_MODULES = {
    "upsert_kafka_ops.local",
    "upsert_kafka_ops.local.kafka",
    "upsert_kafka_ops.local.postgres",
    "upsert_kafka_ops.local.process",
    "upsert_kafka_ops.local.schema_registry",
    "upsert_kafka_ops.local.spark_connect",
    "upsert_kafka_ops.local.tls",
}


def imported_top_names(tree: ast.Module) -> set[str]:
    """The top-level package of every absolute import in ``tree`` (anywhere in it)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names


def test_the_package_imports_nothing_from_the_tests() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "tests" in imported_top_names(ast.parse(path.read_text(), str(path))):
            found.append(str(path.relative_to(ROOT)))
    assert found == [], "the installed package has no tests/: move what these need into the package"


def test_local_holds_only_the_services_users_run() -> None:
    modules = {m for m in package_modules() if m == f"{TOP}.local" or m.startswith(f"{TOP}.local.")}
    assert sorted(modules - LOCAL_MODULES) == [], (
        "a service only tests start goes in tests/devservices; one users run goes in LOCAL_MODULES"
    )
    assert sorted(LOCAL_MODULES - modules) == [], "LOCAL_MODULES names a module local/ does not have"


def test_every_local_module_is_used_by_the_rest_of_the_package() -> None:
    """A module of ``local`` that no other part of the package uses (the CLI, the demo) is one only the
    tests use. A name taken from ``local`` itself counts for the module that defines it, not for every
    module ``local/__init__.py`` re-exports."""
    modules, all_uses = package_uses()
    local = f"{TOP}.local"
    defined_in = {name: u.target for u in all_uses if u.source == local for name in u.names}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for u in all_uses:
        if u.target in modules and u.source != local:
            graph[u.source].add(u.target)
            if u.target == local:
                graph[u.source].update(defined_in[name] for name in u.names if name in defined_in)
    reached = {m for m in modules if unit_of(m) != "local"}
    todo = list(reached)
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    unused = {m for m in modules if unit_of(m) == "local"} - reached
    assert sorted(unused) == [], "only tests use these: move them to tests/devservices"


def test_a_test_import_in_the_package_is_found() -> None:
    tree = ast.parse(
        "def f():\n    from tests.devservices import LocalS3\nimport tests.costs\nfrom . import x\n"
    )
    assert imported_top_names(tree) == {"tests"}


# -- the checks, on small sources --------------------------------------------------------------------
def _uses(source: str, module: str = "upsert_kafka_ops.jobs.run") -> list[Use]:
    names = {
        "upsert_kafka_ops.jobs.core",
        "upsert_kafka_ops.engine.warehouse",
        "upsert_kafka_ops.dagster._plan",
    }
    return list(uses(module, ast.parse(source), names))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from upsert_kafka_ops.jobs.core import _Runner", ["uses upsert_kafka_ops.jobs.core._Runner"]),
        ("from .core import _Runner", ["uses upsert_kafka_ops.jobs.core._Runner"]),
        ("from upsert_kafka_ops.engine import warehouse as wh\nwh._stage(1)",
         ["uses upsert_kafka_ops.engine.warehouse._stage"]),
        ("import upsert_kafka_ops.engine.warehouse as wh\nwh._stage", ["uses upsert_kafka_ops.engine.warehouse._stage"]),
        ("from upsert_kafka_ops.dagster._plan import plan", ["uses the private module upsert_kafka_ops.dagster._plan"]),
        ("from upsert_kafka_ops.jobs.core import RunContext, __version__", []),
        ("from upsert_kafka_ops.engine import warehouse as wh\nwh.stage(1)", []),
    ],
)  # fmt: skip
def test_private_uses_are_found(source: str, expected: list[str]) -> None:
    found = private_uses(_uses(source))
    assert [f.split(" ", 1)[1] for f in found] == expected


def test_a_private_module_may_be_used_inside_its_package() -> None:
    inside = _uses("from upsert_kafka_ops.dagster._plan import plan", "upsert_kafka_ops.dagster.assets")
    assert private_uses(inside) == []


def test_circles_are_found_and_a_tree_has_none() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_layers_are_read_from_the_table_and_an_upward_import_is_found() -> None:
    layers = read_layers("| layer | units |\n|---|---|\n| 2 | `jobs` | x |\n| 1 | `engine`, `errors` | y |\n")
    assert layers == {"jobs": 2, "engine": 1, "errors": 1}
    up = [Use("upsert_kafka_ops.engine.source", "upsert_kafka_ops.jobs.core", ("RunContext",), 3)]
    assert layer_breaches(up, layers) == [
        "upsert_kafka_ops.engine.source:3 (layer 1) imports upsert_kafka_ops.jobs.core (layer 2)"
    ]
    down = [Use("upsert_kafka_ops.jobs.core", "upsert_kafka_ops.engine.source", (), 3)]
    assert layer_breaches(down, layers) == []
