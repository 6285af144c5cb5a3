"""What a search's scores depend on: the journal's header, so a resumed search never takes a score made for another
model, text or setting.

The header holds

* ``model``: the real path of the model (``tiny``: the bundled checkpoint's folder) and its fingerprint
  (:func:`ropekit.integrations.fingerprint.fingerprint`: config, tokenizer and weights), so the same ``--model``
  typed from another folder, or a fine-tune saved over the folder, is another model;
* ``text``: the filler text's SHA-256 (its contents: a moved copy is the same text, an edited file another);
* ``settings``: every setting that decides a candidate or its score: the target length in tokens, the sample
  counts, the seed, the population and parents, the operators, ``switch`` and the dtype;
* ``plan``: the budget (the count of candidates, and the time budget it came from); not compared, since a search's
  first N candidates are the same whatever its budget (:mod:`ropekit.search.evolve`).

:func:`header_changes` says what differs between two headers, in the arguments' own names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the ``format`` of a journal header this ropekit writes and reads
JOURNAL_FORMAT = "ropekit-search-journal/2"
#: header keys compared on resume (``plan`` is not)
COMPARED = ("format", "model", "text", "settings")


def model_path(spec: str | Path) -> Path:
    """The real path of the model ``spec`` names (``tiny``: the bundled checkpoint's folder)."""
    from ropekit.model.checkpoint import BUNDLED, resolve

    if isinstance(spec, str) and spec in BUNDLED:
        return resolve(spec).resolve()
    return Path(spec).resolve()


def model_identity(spec: str | Path) -> dict[str, str]:
    """``{"path", "fingerprint"}`` of the model ``spec`` names."""
    from ropekit.integrations.fingerprint import fingerprint

    path = model_path(spec)
    return {"path": str(path), "fingerprint": fingerprint(path)}


def header_changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between a recorded header and this search's, one phrase each (``model (another file or folder:
    'a' → 'b')``, ``text (its contents: sha256 1a2b… → 3c4d…)``, ``samples: 16 → 8``); ``plan`` is not compared."""
    if recorded.get("format") != now.get("format"):
        return [f"format: written by another ropekit ({recorded.get('format', 'no format')!r})"]
    changes = []
    old_model, new_model = recorded.get("model") or {}, now.get("model") or {}
    if old_model.get("path") != new_model.get("path"):
        changes.append(f"model (another file or folder: {old_model.get('path')!r} → {new_model.get('path')!r})")
    elif old_model.get("fingerprint") != new_model.get("fingerprint"):
        changes.append(
            f"model (its config, tokenizer or weights changed at {new_model.get('path')!r}: fingerprint "
            f"{_short(old_model.get('fingerprint'))} → {_short(new_model.get('fingerprint'))})"
        )
    old_text, new_text = recorded.get("text") or {}, now.get("text") or {}
    if old_text.get("sha256") != new_text.get("sha256"):
        changes.append(
            f"text (its contents: sha256 {_short(old_text.get('sha256'))} → {_short(new_text.get('sha256'))})"
        )
    old, new = recorded.get("settings") or {}, now.get("settings") or {}
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {old.get(key, 'absent')} → {new.get(key, 'absent')}")
    return changes


def _short(digest: Any) -> str:
    return f"{digest[:12]}…" if isinstance(digest, str) else repr(digest)
