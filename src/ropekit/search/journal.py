"""The search journal: one JSON line per scored candidate, after a header line with everything the search depends
on (:mod:`ropekit.search.identity`), so a stopped search resumes where it stopped and ends with the same result.

The search is a pure function of its settings and the scores it sees; resuming replays it from the start and takes
each score already in the journal instead of scoring again (checking that the replayed candidate is the one
recorded), then scores and appends the rest.

Reading is by line, as the served-evaluation journal reads its own:

* the first line must be this ropekit's header (``{"header": {"format": "ropekit-search-journal/…", ...}}``); a
  file that does not start so (another program's, a JSON list, an empty first line) is not ropekit's and is refused,
  whatever ``replace`` says, since ropekit only replaces what it wrote;
* a header that differs from this search's is refused, naming what changed, unless ``replace`` (then the journal
  starts again);
* a later line that is not a scored candidate (cut short by a run that died, a foreign line, an entry without a
  finite ``score``, a repeated index) is skipped, counted in ``Journal.skipped``, and scored again.

The journal is never read or written through a symbolic link (even a dangling one): the scores stay in ``--out``.
When a search starts, the file is rewritten whole (header with this run's plan, then the entries kept) beside itself
and renamed into place, so a cut line never merges with the next entry.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ropekit.errors import InvalidArgument
from ropekit.search.identity import JOURNAL_FORMAT, header_changes
from ropekit.search.space import Candidate

#: the file a search journals into, in its output folder
JOURNAL = "journal.jsonl"


class JournalMismatch(InvalidArgument):
    """The journal cannot be resumed: written by a search with other inputs or settings, not by ropekit, a symbolic
    link, or it does not replay (one line, naming what). About the argument ``out``.

    Attributes:
        foreign: the file is not a journal ropekit wrote (``replace`` does not remove it).
    """

    def __init__(self, path: Path, message: Any, *, foreign: bool = False) -> None:
        self.foreign = foreign
        super().__init__("out", str(path.parent), message=message, leads=False)


def is_own_header(row: Any) -> bool:
    """Whether a journal's first line (parsed) is the header of a ropekit search journal (of any version)."""
    header = row.get("header") if isinstance(row, dict) else None
    if not isinstance(header, dict):
        return False
    return str(header.get("format", "")).startswith("ropekit-search-journal") or {"model", "seed"} <= set(header)


def refuse_link(path: Path) -> None:
    """Raise :class:`JournalMismatch` when ``path`` is a symbolic link (dangling or not)."""
    if path.is_symlink():
        raise JournalMismatch(
            path,
            f"{str(path)!r} is a symbolic link; the journal is written only into the output folder itself, never "
            "through a link: remove the link",
            foreign=True,
        )


def read_journal(path: Path) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]], list[int]]:
    """``(header, entries by index, skipped line numbers)`` of the journal at ``path`` (``(None, {}, [])`` when
    there is none).

    Raises:
        JournalMismatch: a symbolic link, a file that is not a ropekit search journal, or one that cannot be read.
    """
    refuse_link(path)
    if not path.exists():
        return None, {}, []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        raise JournalMismatch(path, f"journal {str(path)!r} cannot be read ({error.strerror or error})") from None
    first = _parse(lines[0]) if lines else None
    if not is_own_header(first):
        raise JournalMismatch(
            path,
            f"{str(path)!r} is not a journal of ropekit search (its first line is not a search header); ropekit "
            "neither resumes nor replaces a file it did not write: move it away",
            foreign=True,
        )
    entries: dict[int, dict[str, Any]] = {}
    skipped = []
    for number, line in enumerate(lines[1:], start=2):
        entry = _entry(_parse(line))
        if entry is None or entry["index"] in entries:
            skipped.append(number)
            continue
        entries[entry["index"]] = entry
    return first["header"], entries, skipped


def _parse(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _entry(row: Any) -> dict[str, Any] | None:
    """The entry of a journal line, or ``None`` for a line that is not a scored candidate."""
    if not isinstance(row, dict):
        return None
    index, generation, score = row.get("index"), row.get("generation", 0), row.get("score")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (index, generation)):
        return None
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        return None
    try:
        candidate = Candidate.from_dict(row["candidate"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return {"index": index, "generation": generation, "score": float(score), "candidate": candidate.to_dict()}


class Journal:
    """Scores recorded so far, appended as they are made (``path``: ``None`` keeps them in memory only).

    Opening reads and checks; nothing is written until :meth:`begin`.

    Args:
        path: the journal file (JSON lines).
        header: what the search depends on (:mod:`ropekit.search.identity`), without ``plan``.
        replace: a ropekit journal with another header starts again instead of being refused (a matching one is
            resumed either way; a file ropekit did not write is refused either way).

    Raises:
        JournalMismatch: see :func:`read_journal`; or another header without ``replace`` (naming what changed).
    """

    def __init__(self, path: str | Path | None, header: dict[str, Any], *, replace: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self.header = json.loads(json.dumps({**header, "format": JOURNAL_FORMAT}))  # as it reads back
        self.entries: dict[int, dict[str, Any]] = {}
        #: line numbers skipped as not a scored candidate; whether another search's journal was started again
        self.skipped: list[int] = []
        self.replaced = False
        #: the plan the journal recorded (``None``: a new journal)
        self.recorded_plan: dict[str, Any] | None = None
        self.resumed = 0
        if self.path is None:
            return
        recorded, entries, skipped = read_journal(self.path)
        if recorded is None:
            return
        changes = header_changes({k: v for k, v in recorded.items() if k != "plan"}, self.header)
        if changes and not replace:
            raise JournalMismatch(
                self.path,
                lambda n: (
                    f"journal {str(self.path)!r} holds the scores of another search ({'; '.join(changes)}); resuming "
                    f"would mix them into this one: pass {n('force', True)} to start it again"
                ),
            )
        self.replaced = bool(changes)
        if not changes:
            self.entries, self.skipped = entries, skipped
            self.recorded_plan = recorded.get("plan") if isinstance(recorded.get("plan"), dict) else None
        #: how many scores the journal held when it was opened (and kept)
        self.resumed = len(self.entries)

    def begin(self, plan: dict[str, Any]) -> None:
        """Write the journal: the header with ``plan``, then the entries kept (a new file beside it, renamed)."""
        self.header["plan"] = plan
        if self.path is None:
            return
        refuse_link(self.path)
        staged = self.path.with_name(f".{self.path.name}.partial")
        with _open(staged, "w") as handle:
            handle.write(json.dumps({"header": self.header}) + "\n")
            for index in sorted(self.entries):
                handle.write(json.dumps(self.entries[index]) + "\n")
        os.replace(staged, self.path)

    def recorded(self, index: int, candidate: Candidate) -> float | None:
        """The score of evaluation ``index`` if the journal has it (``candidate`` must be the one recorded)."""
        entry = self.entries.get(index)
        if entry is None:
            return None
        if Candidate.from_dict(entry["candidate"]).key() != candidate.key():
            raise JournalMismatch(
                self.path or Path("journal"),
                f"journal {str(self.path)!r} entry {index} records another candidate than the search makes (an "
                "edited journal, or one from another ropekit version): delete it to search again",
            )
        return float(entry["score"])

    def append(self, index: int, candidate: Candidate, score: float, generation: int) -> None:
        entry = {"index": index, "generation": generation, "score": score, "candidate": candidate.to_dict()}
        self.entries[index] = entry
        if self.path is not None:
            with _open(self.path, "a") as handle:
                handle.write(json.dumps(entry) + "\n")


def _open(path: Path, mode: str):
    """``path`` opened to write (``"w"``: truncated) or append, never following a symbolic link put there."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
    try:
        return os.fdopen(os.open(path, flags, 0o644), mode, encoding="utf-8")
    except OSError as error:
        raise JournalMismatch(path, f"journal {str(path)!r} cannot be written ({error.strerror or error})") from None
