"""The search journal: one JSON line per scored candidate, after a header line with everything the search depends
on, so a stopped search resumes where it stopped and ends with the same result.

The search is a pure function of its settings and the scores it sees; resuming replays it from the start and takes
each score already in the journal instead of scoring again (checking that the replayed candidate is the one
recorded), then scores and appends the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ropekit.search.space import Candidate


class JournalMismatch(ValueError):
    """The journal was written by a search with other settings, or does not replay (a changed ropekit)."""


class Journal:
    """Scores recorded so far, appended as they are made (``path``: ``None`` keeps them in memory only).

    Args:
        path: the journal file (JSON lines); created with ``header`` when missing.
        header: what the search depends on (model, target, seed, samples, operators); an existing journal with
            another header raises :class:`JournalMismatch`. Its ``plan`` entry (the evaluation count a ``--budget`` in
            time gave when the search started) is not compared: a resumed search takes the journal's.
    """

    def __init__(self, path: str | Path | None, header: dict[str, Any]) -> None:
        self.path = None if path is None else Path(path)
        self.header = json.loads(json.dumps(header))  # as it reads back
        self.entries: list[dict[str, Any]] = []
        if self.path is not None and self.path.is_file():
            lines = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
            old = lines[0].get("header", {}) if lines else {}
            keys = (set(self.header) | set(old)) - {"plan"}
            changed = sorted(k for k in keys if old.get(k) != self.header.get(k))
            if changed:
                where = str(self.path)
                raise JournalMismatch(f"journal {where!r} is from a search with other settings ({', '.join(changed)})")
            self.entries = lines[1:]
            self.header["plan"] = old.get("plan")
        elif self.path is not None:
            self.path.write_text(json.dumps({"header": self.header}) + "\n")
        #: how many scores the journal held when it was opened
        self.resumed = len(self.entries)

    def recorded(self, index: int, candidate: Candidate) -> float | None:
        """The score of evaluation ``index`` if the journal has it (``candidate`` must be the one recorded)."""
        if index >= len(self.entries):
            return None
        entry = self.entries[index]
        if Candidate.from_dict(entry["candidate"]).key() != candidate.key():
            raise JournalMismatch(f"journal entry {index} records another candidate than the replay makes")
        return float(entry["score"])

    def append(self, index: int, candidate: Candidate, score: float, generation: int) -> None:
        entry = {"index": index, "generation": generation, "score": score, "candidate": candidate.to_dict()}
        self.entries.append(entry)
        if self.path is not None:
            with self.path.open("a") as handle:
                handle.write(json.dumps(entry) + "\n")
