"""The needle kinds of the search objective: which ones the search scores, which ones it holds out.

A *kind* names how a sample is made: ``passkey`` (:func:`ropekit.synthetic.passkey.passkey_episode`), a RULER-style
task of :mod:`ropekit.synthetic.suite` (``niah_single_1``, ``vt``, ...), in the wording the bundled model was
trained on, or ``phrase:<name>``, one needle in a wording of :data:`ropekit.synthetic.phrasings.PHRASINGS` that no
training mixture holds. The search scores its candidates on :data:`SEARCH_KINDS` only; :data:`HELDOUT_KINDS` share
neither a task nor a wording with them, so a held-out score says whether the factors retrieve, not whether they fit
one wording. In every kind the (first) needle lies in the first half of the haystack, so every answer depends on a
token at least about T/2 back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ropekit.errors import InvalidArgument

#: scored during the search: the passkey, five tasks of three families, two rewordings
SEARCH_KINDS = (
    "passkey",
    "niah_single_1",
    "niah_single_2",
    "niah_multikey_1",
    "niah_multivalue",
    "vt",
    "phrase:secret",
    "phrase:label",
)
#: never scored during the search: other tasks (UUID values, distractor needles, several keys asked, word
#: frequencies) and other wordings (one of them without a key)
HELDOUT_KINDS = (
    "niah_single_3",
    "niah_multikey_2",
    "niah_multiquery",
    "fwe",
    "phrase:record",
    "phrase:note",
    "phrase:code",
)
#: the value each wording states
PHRASE_VALUES = {"secret": "number", "label": "word", "record": "number", "note": "word", "code": "number"}
#: the needle's depth is drawn uniformly from [0, MAX_DEPTH] (a fraction of the haystack)
MAX_DEPTH = 0.5
PREFIX = "phrase:"


def check_kind(kind: str) -> str:
    """``kind`` if ropekit can make it.

    Raises:
        InvalidArgument: about ``kinds``, listing the valid ones.
    """
    from ropekit.synthetic.suite import TASKS

    valid = ("passkey", *TASKS.names(), *(PREFIX + name for name in PHRASE_VALUES))
    if kind not in valid:
        raise InvalidArgument("kinds", kind, allowed=valid, message=f"unknown needle kind {kind!r}; valid: {valid}")
    return kind


def kind_sample(
    kind: str,
    rng: np.random.Generator,
    filler: np.ndarray,
    length: int,
    *,
    encode: Callable[[bytes], np.ndarray],
    pieces=None,
) -> tuple[np.ndarray, int]:
    """One sample of ``kind`` of exactly ``length`` tokens whose answer ends it, as ``(ids, answer length)``.

    Args:
        rng: every draw of the sample (its depth first, in [0, :data:`MAX_DEPTH`]).
        filler: token ids of the text haystack (and the passkey's filler).
        encode: text (bytes) → token ids.
        pieces: a shared :class:`~ropekit.synthetic.base.Pieces` (made from ``encode`` when ``None``).
    """
    from ropekit.synthetic.base import Haystack, Pieces
    from ropekit.synthetic.passkey import passkey_episode
    from ropekit.synthetic.phrasings import phrased_sample
    from ropekit.synthetic.suite import TASKS

    check_kind(kind)
    depth = float(rng.uniform(0.0, MAX_DEPTH))
    if kind == "passkey":
        episode = passkey_episode(rng, filler, length, depth, encode=encode)
        return np.asarray(episode.ids, dtype=np.int64), int(episode.answer_len)
    pieces = pieces or Pieces(encode)
    if kind.startswith(PREFIX):
        name = kind[len(PREFIX) :]
        sample = phrased_sample(
            kind,
            rng,
            length,
            pieces,
            haystack=Haystack("text", filler),
            phrasing=name,
            value_kind=PHRASE_VALUES[name],
            depth=depth,
        )
    else:
        sample = TASKS.get(kind).sample(rng, length, pieces, filler, depth=depth)
    return np.asarray(sample.sequence(0), dtype=np.int64), len(sample.questions[0].target)
