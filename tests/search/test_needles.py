"""The objective's needle kinds: held-out kinds and wordings are never scored during the search, and the wordings
are what they say they are."""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.search.needles import HELDOUT_KINDS, PREFIX, SEARCH_KINDS, kind_sample
from ropekit.synthetic import niah
from ropekit.synthetic.phrasings import PHRASINGS


def test_search_and_heldout_kinds_share_no_task_and_no_wording():
    assert not set(SEARCH_KINDS) & set(HELDOUT_KINDS)
    wordings = [{k[len(PREFIX) :] for k in kinds if k.startswith(PREFIX)} for kinds in (SEARCH_KINDS, HELDOUT_KINDS)]
    assert wordings[0] and wordings[1] and not wordings[0] & wordings[1]
    assert "magic" not in wordings[1]  # RULER's wording (the tasks') is not a held-out wording


def test_magic_wording_is_rulers():
    words = PHRASINGS["magic"]
    fields = {"kind": "number", "key": "keyo", "value": "1234567"}
    assert words.needle.format(**fields) == niah.needle_text("number", "keyo", "1234567")
    assert words.question.format(**fields) == niah.question_text("number", ["keyo"], 1)


@pytest.mark.parametrize("kind", [*SEARCH_KINDS, *HELDOUT_KINDS])
def test_every_kind_has_the_exact_length_and_its_answer_last(kind):
    filler = np.frombuffer(b"the quick brown fox jumps over a lazy dog. " * 400, dtype=np.uint8).astype(np.int64)

    def encode(data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=np.uint8).astype(np.int64)

    ids, answer = kind_sample(kind, np.random.default_rng([0, 1, 3]), filler, 700, encode=encode)
    assert ids.shape == (700,) and 1 <= answer < 60
    text = bytes(ids.astype(np.uint8).tolist()).decode()
    if kind == "passkey" or kind.startswith(PREFIX):  # a single value, stated once in the context, is the answer
        value = text[len(text) - answer :].strip()
        assert value and value in text[: len(text) - answer]


def test_the_search_never_scores_a_heldout_sample():
    """Every row the model runs during the search is a search sample (or an L0 window); none is held out."""
    from ropekit.search.journal import Journal
    from ropekit.search.request import SearchRequest
    from ropekit.search.run import execute, prepare

    prepared = prepare(SearchRequest(target_multiple=2.0, samples=2, heldout_samples=len(HELDOUT_KINDS)))
    assert set(prepared.search.kinds) <= set(SEARCH_KINDS)
    assert set(prepared.heldout.kinds) == set(HELDOUT_KINDS)
    seen: list[tuple] = []
    forward = prepared.model.hidden_states

    def recording(ids):
        seen.extend(tuple(row.tolist()) for row in ids)
        return forward(ids)

    prepared.model.hidden_states = recording
    execute(prepared, 3, Journal(None, prepared.header()))
    search = {tuple(row[:-1].tolist()) for row in prepared.search.ids}
    heldout = {tuple(row[:-1].tolist()) for row in prepared.heldout.ids}
    windows = {tuple(row[:-1].tolist()) for row in prepared.short.ids}
    long_rows = [row for row in seen if len(row) == prepared.target_length - 1]
    assert long_rows and set(long_rows) <= search and not set(long_rows) & heldout
    assert set(seen) - set(long_rows) <= windows
