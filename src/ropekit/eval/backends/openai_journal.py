"""The journal of a server evaluation's answers: JSON lines in the run's ``--out``, read to resume a run cut short.

The first line records what decides an answer (:func:`~ropekit.eval.backends.openai_served.server_identity`: the URL,
the served model's id and what the server reports about it, the tokenizer's content hash, the request's settings) and
what the server computes (:func:`~ropekit.eval.backends.openai_fingerprint.server_computes`: its greedy continuation of
one fixed prompt past L0); every later line is one answer, keyed by the prompt's ids, its budget and the first record's
digest. A resumed run whose record differs, or whose server computes another continuation (a server restarted with
another context or RoPE keeps its model id and may report nothing else, so what it reports alone proves nothing), is
refused, naming what changed, unless it starts the journal again (``fresh``). The journal is never written through a symbolic
link, so answers land in ``--out`` and nowhere else. A line cut short by a run that died is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["AnswerJournal", "JournalMismatch", "answer_key", "identity_changes"]


class JournalMismatch(ValueError):
    """The journal holds answers from another server, model, tokenizer or settings (one line, naming what)."""

    argument = "journal"


def answer_key(ids: list[int], budget: int, digest: str) -> str:
    """The journal key of one question: SHA-256 of the prompt's ids (int64), the budget and the run's digest."""
    salt = f"|{budget}|{digest}".encode()
    return hashlib.sha256(np.asarray(ids, np.int64).tobytes() + salt).hexdigest()


def digest_of(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def identity_changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"key: old → new"`` for each (dotted) key whose value differs between two identities."""
    old, new = _flat(recorded), _flat(now)
    changed = []
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            changed.append(f"{key}: {_short(old.get(key, 'absent'))} → {_short(new.get(key, 'absent'))}")
    return changed


class AnswerJournal:
    """The answers of one run (``path``: ``None`` keeps them in memory only).

    Args:
        identity: what decides an answer (recorded on the first line; a journal with another is refused).
        computes: what the server computes (recorded on the first line; a journal whose record differs beyond
            :func:`~ropekit.eval.backends.openai_fingerprint.computes_changes`' tolerance, or has none, is refused);
            ``None`` (a journal in memory) compares nothing.
        fresh: start the journal again (a symbolic link there is removed, not followed).

    Raises:
        JournalMismatch: the journal was written for another identity or another computation, holds answers without
            a record of them, or is a symbolic link.
    """

    def __init__(
        self,
        path: Path | None,
        identity: dict[str, Any],
        *,
        computes: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> None:
        self.path, self.identity, self.digest = path, identity, digest_of(identity)
        self.computes = computes
        self.done: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if path is None:
            return
        if fresh and (path.is_symlink() or path.is_file()):
            path.unlink()
        if path.is_symlink():
            raise JournalMismatch(
                f"{path} is a symbolic link; answers are written only into the journal's own folder, never through "
                "a link (remove it, or start the journal again)"
            )
        recorded = self._read(path)
        if recorded is None:
            with _append(path) as handle:
                handle.write(json.dumps({"run": identity, "computes": computes}, sort_keys=True) + "\n")

    def _read(self, path: Path) -> dict[str, Any] | None:
        """The recorded identity (``None``: a new journal), with its answers read into ``self.done``."""
        if not path.is_file():
            return None
        recorded, computed, answers = None, None, {}
        for line in path.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
                if recorded is None and isinstance(row.get("run"), dict):
                    recorded, computed = row["run"], row.get("computes")
                elif isinstance(row["text"], str):
                    answers[row["key"]] = {"text": row["text"], "forward": int(row["forward"]), **_sent(row)}
            except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                continue  # a line cut short by the run that died
        if recorded is None and answers:
            raise JournalMismatch(
                f"{path} holds answers without a record of the server and settings they came from; start the "
                "journal again to evaluate"
            )
        changes = "; ".join(self._changes(recorded, computed))
        if changes:
            raise JournalMismatch(
                f"{path} holds answers from another server or settings ({changes}); start the journal again to "
                "evaluate against this one"
            )
        self.done = answers
        return recorded

    def _changes(self, recorded: dict[str, Any] | None, computed: Any) -> list[str]:
        """What differs between the journal's first line and this run's identity and computation."""
        from ropekit.eval.backends.openai_fingerprint import computes_changes

        if recorded is None:
            return []
        changes = identity_changes(recorded, self.identity) if recorded != self.identity else []
        return changes + (computes_changes(computed, self.computes) if self.computes is not None else [])

    def get(self, key: str) -> dict[str, Any] | None:
        return self.done.get(key)

    def sent_forms(self) -> set[str]:
        """How the answers held were sent: ``"ids"``, ``"text"`` or both (none: no answer yet)."""
        with self._lock:
            return {entry["prompt"] for entry in self.done.values() if "prompt" in entry}

    def add(self, key: str, text: str, forward: int, prompt: str) -> None:
        """Record one answer (``prompt``: how it was sent, ``"ids"`` or ``"text"``)."""
        entry = {"text": text, "forward": int(forward), "prompt": prompt}
        with self._lock:
            self.done[key] = entry
            if self.path is not None:
                with _append(self.path) as handle:
                    handle.write(json.dumps({"key": key, **entry}) + "\n")


def _append(path: Path):
    """``path`` opened to append, refusing to follow a symbolic link put there meanwhile."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.fdopen(os.open(path, flags, 0o644), "a", encoding="utf-8")
    except OSError as error:
        raise JournalMismatch(f"{path} cannot be appended to ({error.strerror})") from None


def _sent(row: dict[str, Any]) -> dict[str, str]:
    return {"prompt": row["prompt"]} if row.get("prompt") in ("ids", "text") else {}


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flat(inner, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): value}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
