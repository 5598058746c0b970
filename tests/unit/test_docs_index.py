"""docs/index.md lists every page of docs/ once in its tables, each link reaches a page that is there,
and the README points to it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)")


def test_the_index_lists_every_page_once_and_every_link_reaches_a_page() -> None:
    rows = [line for line in (DOCS / "index.md").read_text().splitlines() if line.startswith("| [")]
    linked = [name for row in rows for name in LINK.findall(row)]
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    missing = sorted(set(pages) - set(linked))
    assert not missing, f"pages docs/index.md does not list (add each under its group): {missing}"
    gone = sorted(set(linked) - set(pages))
    assert not gone, f"docs/index.md links pages that are not in docs/: {gone}"
    twice = sorted({name for name in linked if linked.count(name) > 1})
    assert not twice, f"docs/index.md lists pages more than once: {twice}"


def test_the_readme_points_to_the_index() -> None:
    assert "(docs/index.md)" in (ROOT / "README.md").read_text()
