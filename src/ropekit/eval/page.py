"""The HTML shell of every page ropekit writes (the evaluation report, the experiments' pages): one style."""

from __future__ import annotations

import html

__all__ = ["STYLE", "html_page"]

#: self-contained CSS: no fonts or scripts to fetch, so a page opens offline
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}code{background:#f6f6f6}"
)


def html_page(title: str, body: str) -> str:
    """A complete HTML document: ``title`` (escaped here) and ``body`` (HTML, inserted as given) in the shared style."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>"
    )
