"""The docs are a map: docs/index.md links every page, no page is over 60 KB, README stays under 8 KB and links the
index. Oracle: the files on disk."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_index_links_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)\)", index))
    pages = {path.name for path in DOCS.glob("*.md")} - {"index.md"}
    assert pages - linked == set(), f"pages the index does not link: {sorted(pages - linked)}"
    assert {name for name in linked if not (DOCS / name).is_file()} == set()


def test_no_page_is_over_60_kb_and_readme_is_short() -> None:
    large = {path.name: path.stat().st_size for path in DOCS.glob("*.md") if path.stat().st_size > 60_000}
    assert large == {}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) < 8_000 and "docs/index.md" in readme
