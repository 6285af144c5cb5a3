"""One needle, one question, in several wordings: whether a model retrieves a fact or a phrase it was trained on.

The RULER-style tasks (:mod:`~ropekit.synthetic.niah`) and the passkey state their needles in one wording each,
the one the bundled model was trained on. A sample here states one key's value (or a keyless code) in one of
:data:`PHRASINGS`, places it like a needle of :mod:`~ropekit.synthetic.niah`, and asks for it at the end; the answer
is the value, last. ``magic`` is RULER's own wording (the text :func:`ropekit.synthetic.niah.needle_text` and
:func:`~ropekit.synthetic.niah.question_text` give); every other one is a rewording no training mixture of ropekit
holds, so a method tuned to one wording and a method that retrieves can be told apart (``ropekit search`` scores
some wordings and holds others out: :mod:`ropekit.search.needles`).

These samples are not a registered task (:mod:`~ropekit.synthetic.suite`): the training mixture draws from every
registered task, and a held-out wording must stay out of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ropekit._validate import require_choice
from ropekit.synthetic.base import (
    Haystack,
    Pieces,
    Question,
    Sample,
    answer_room,
    budget_for,
    insert_needles,
    too_short,
)
from ropekit.synthetic.niah import VALUE_KINDS, draw_key, draw_value


@dataclass(frozen=True)
class Phrasing:
    """A wording of one needle and its question (``str.format`` templates over ``kind``, ``key`` and ``value``).

    Attributes:
        needle: the statement, its space in front (:mod:`~ropekit.synthetic.base`).
        question: the question and the answer's prefix (the value follows it after a space).
    """

    needle: str
    question: str


#: the wordings by name; ``magic`` is RULER's (what the tiny model was trained on), ``code`` has no key
PHRASINGS: dict[str, Phrasing] = {
    "magic": Phrasing(
        " The magic {kind} for {key} is {value}.", " \nWhat is the magic {kind} for {key}? The {kind} for {key} is"
    ),
    "secret": Phrasing(
        " Remember that the secret {kind} of {key} is {value}.", " \nRecall the secret {kind} of {key}:"
    ),
    "label": Phrasing(" A card labelled {key} shows {value}.", " \nWhat does the card labelled {key} show? It shows"),
    "record": Phrasing(" Record {key} holds the {kind} {value}.", " \nRecord {key} holds the {kind}"),
    "note": Phrasing(" Note: {key} goes with {value}.", " \nWhich {kind} goes with {key}? Answer:"),
    "code": Phrasing(" The access code is {value}. Keep it safe.", " \nWhat was the access code? It was"),
}


def phrased_sample(
    name: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    phrasing: str,
    value_kind: str = "number",
    depth: float | None = None,
) -> Sample:
    """A sample of exactly ``length`` tokens: ``haystack`` with one needle worded by ``PHRASINGS[phrasing]`` at
    ``depth`` (drawn uniformly when ``None``), then its question; the answer (the value) ends the sample's length
    (:func:`~ropekit.synthetic.base.answer_room`).

    Args:
        name: the name recorded in the sample.
        haystack: ``noise`` or ``text`` (a ``needles`` haystack is noise here: there are no other keys).
        phrasing: one of :data:`PHRASINGS`.
        value_kind: one of :data:`~ropekit.synthetic.niah.VALUE_KINDS`.

    Raises:
        ValueError: an unknown ``phrasing`` or ``value_kind``, or a ``length`` that cannot hold the needle, the
            question and the answer.
    """
    require_choice("phrasing", phrasing, tuple(PHRASINGS))
    require_choice("value_kind", value_kind, VALUE_KINDS)
    words = PHRASINGS[phrasing]
    key, value = draw_key(rng, "word"), draw_value(rng, value_kind)
    fields = {"kind": value_kind, "key": key, "value": value}
    needle = pieces.ids(words.needle.format(**fields))
    target = pieces.ids(" " + value)
    question = Question(pieces.ids(words.question.format(**fields)), (value,), target, budget_for(target))
    fill = length - len(needle) - answer_room(question)
    if fill < 0:
        raise too_short(name, length, len(needle) + answer_room(question) - 1)
    first = float(rng.random()) if depth is None else float(depth)
    filler = Haystack("noise") if haystack.kind == "needles" else haystack
    stream, bounds = filler.stream(rng, fill, pieces)
    context, starts = insert_needles(stream, bounds, [needle], [first])
    return Sample(name, context, (question,), first, starts)
