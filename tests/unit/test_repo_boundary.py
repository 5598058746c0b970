"""Nothing the suite, the package or the tools run reads a path outside the repository: a user's clone
has nothing beside it. (CI also runs the suite in a clone with nothing beside it: .ci/run.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("src", "tests", "benchmarks", "dags", "dagster_defs", "scripts")
TEXT_FILES = ("Makefile", ".ci/run", "docker/Dockerfile")
# A parent step in a path ("../x", "..\x", a trailing "/.."), or a folder of the team's reading material.
_OUTSIDE = re.compile(r"(^|[\s'\"=:(/])\.\.([/\\]|$|[\s'\"])|\bshared/(reference|research)\b")


def _python_files() -> list[Path]:
    this = Path(__file__).resolve()  # its examples of what the check finds are strings, not reads
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py") if p.resolve() != this)


def _climb(node: ast.expr) -> int | None:
    """How many folders ``Path(__file__)[.resolve()](.parent|.parents[N])*`` climbs from the file
    itself (the file's own folder is 1), or None for any other expression."""
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _climb(node.value)
        return None if inner is None else inner + 1
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parents"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, int)
    ):
        inner = _climb(node.value.value)
        return None if inner is None else inner + node.slice.value + 1
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("resolve", "absolute")
    ):
        return _climb(node.func.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Path"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "__file__"
    ):
        return 0
    return None


def outside_references(path: Path, text: str) -> list[str]:
    """The places in one file that name a path outside the repository."""
    found = [f"{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if _OUTSIDE.search(line)]
    if path.suffix == ".py":
        depth = len(path.relative_to(ROOT).parts) - 1  # folders between the root and the file
        for node in ast.walk(ast.parse(text)):
            climbed = _climb(node) if isinstance(node, ast.expr) else None
            if climbed is not None and climbed > depth + 1:
                found.append(f"{node.lineno}: climbs {climbed} folders from a file {depth} below the root")
    return found


@pytest.mark.parametrize(
    "path", _python_files() + [ROOT / f for f in TEXT_FILES], ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_file_names_a_path_outside_the_repository(path: Path) -> None:
    assert outside_references(path, path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "text",
    [
        'REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"\n',
        'DOCS = Path(__file__).resolve().parents[3] / "docs"\n',
        'DOCS = Path(__file__).parent.parent.parent.parent / "docs"\n',
        'open("../notes/team.md")\n',
        'x = "shared/research/lag-metrics.md"\n',
    ],
)
def test_the_check_finds_a_path_outside(text: str) -> None:
    assert outside_references(ROOT / "tests" / "unit" / "example.py", text) != []


def test_the_check_reads_shell_and_make_files_as_text() -> None:
    assert outside_references(ROOT / ".ci" / "run", 'cd "$(dirname "$0")/.."\n') != []
    assert outside_references(ROOT / "Makefile", "\tcd .. && make test\n") != []
    assert outside_references(ROOT / "Makefile", "\tmake -C docs html\n") == []


@pytest.mark.parametrize(
    "text",
    [
        'DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"\n',
        'DATA = Path(__file__).parent.parent / "data"\n',
        'jars = Path(pyspark.__file__).parent / "jars"\n',
        'x = "1..5" if a else "v1.2..."\n',
    ],
)
def test_the_check_lets_paths_inside_pass(text: str) -> None:
    assert outside_references(ROOT / "tests" / "unit" / "example.py", text) == []
