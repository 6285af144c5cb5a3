"""The search journal read line by line: a cut line, a foreign line or an entry without a finite score is skipped
(and scored again), a file that does not start with ropekit's header is refused as not ropekit's, and the rewritten
journal holds only whole entries.

Oracle: the entries written, known by construction, against those read back."""

from __future__ import annotations

import json

import pytest

from ropekit.search.journal import Journal, JournalMismatch
from ropekit.search.space import Candidate

HEADER = {"settings": {"seed": 0}}


def _journal(path, count: int) -> list[Candidate]:
    journal = Journal(path, HEADER)
    journal.begin({"evaluations": count})
    candidates = [Candidate(i % 3, (0.0, 0.1 * i)) for i in range(count)]
    for index, candidate in enumerate(candidates):
        journal.append(index, candidate, 1.0 + index, 0)
    return candidates


@pytest.mark.parametrize(
    "damage",
    [
        lambda lines: [*lines[:-1], lines[-1][:17]],  # cut short by a run that died
        lambda lines: [*lines[:2], "not json at all", *lines[2:]],  # a foreign line
        lambda lines: [*lines[:2], "[1, 2, 3]", *lines[2:]],  # a JSON list
        lambda lines: [*lines[:2], json.dumps({**json.loads(lines[2]), "score": None}), *lines[3:]],  # no score
        lambda lines: [*lines[:2], json.dumps({k: v for k, v in json.loads(lines[2]).items() if k != "score"})],
        lambda lines: [*lines[:2], lines[2].replace('"score": 2.0', '"score": NaN'), *lines[3:]],
    ],
)
def test_bad_lines_are_skipped_and_the_rest_resumed(tmp_path, damage):
    path = tmp_path / "journal.jsonl"
    candidates = _journal(path, 4)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(damage(lines)))  # no newline at the end either
    journal = Journal(path, HEADER)
    assert journal.skipped and journal.resumed < 4 + 1
    for index, entry in journal.entries.items():  # every entry kept is one that was written
        assert journal.recorded(index, candidates[index]) == 1.0 + index == entry["score"]
    journal.begin({"evaluations": 4})
    journal.append(9, candidates[0], 5.0, 1)
    reread = Journal(path, HEADER)
    assert reread.skipped == [] and set(reread.entries) == set(journal.entries)


@pytest.mark.parametrize("first", ["[1, 2]", "", '{"header": [1]}', '{"model": "tiny"}', "garbage"])
def test_a_file_without_ropekits_header_is_refused_even_to_replace(tmp_path, first):
    path = tmp_path / "journal.jsonl"
    path.write_text(first + "\n" + '{"index": 0, "score": 1.0}\n')
    for replace in (False, True):
        with pytest.raises(JournalMismatch, match="not a journal of ropekit search") as caught:
            Journal(path, HEADER, replace=replace)
        assert caught.value.foreign and caught.value.argument == "out"
    assert path.read_text().startswith(first)


def test_a_replayed_candidate_that_differs_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    _journal(path, 2)
    with pytest.raises(JournalMismatch, match="entry 1 records another candidate"):
        Journal(path, HEADER).recorded(1, Candidate(0, (0.5, 0.5)))


def test_appends_never_follow_a_link_put_there(tmp_path):
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, HEADER)
    journal.begin({"evaluations": 1})
    target = tmp_path / "elsewhere"
    target.write_text("")
    path.unlink()
    path.symlink_to(target)
    with pytest.raises(JournalMismatch, match="cannot be written"):
        journal.append(0, Candidate(0, (0.0,)), 1.0, 0)
    assert target.read_text() == ""
