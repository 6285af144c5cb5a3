"""Needle in a haystack, RULER's retrieval family (Hsieh et al., arXiv 2404.06654, section 3.1).

A needle states ``The magic <kind> for <key> is <value>.``; the question at the end asks for the value of one key
(single, multi-key), for every value of one key (multi-value) or for the values of several keys at once
(multi-query). Keys are pseudo-words (or UUIDs); values 7-digit numbers, pseudo-words or UUIDs. The templates are
shorter than RULER's so that every task fits the bundled model's 256-byte context.

Placement: the first asked needle goes at ``depth`` (drawn uniformly when ``None``, as RULER draws it); every other
needle at a uniformly random depth.
"""

from __future__ import annotations

import numpy as np

from ropekit._validate import require_choice
from ropekit.synthetic.base import (
    Haystack,
    Pieces,
    Question,
    Sample,
    answer_room,
    budget_for,
    draw_new,
    insert_needles,
    random_number,
    random_uuid,
    random_word,
    too_short,
)

#: what a key can be (``key_kind``): a pseudo-word or a UUID
KEY_KINDS = ("word", "uuid")
#: what a value can be (``value_kind``): a 7-digit number, a pseudo-word or a UUID
VALUE_KINDS = ("number", "word", "uuid")


def draw_key(rng: np.random.Generator, kind: str) -> str:
    return random_uuid(rng) if kind == "uuid" else random_word(rng, 2)


def draw_value(rng: np.random.Generator, kind: str) -> str:
    if kind == "number":
        return random_number(rng)
    return random_uuid(rng) if kind == "uuid" else random_word(rng, 3)


def needle_text(kind: str, key: str, value: str) -> str:
    """One needle, its space in front (a piece joins the text before it at a space: :mod:`~ropekit.synthetic.base`)."""
    return f" The magic {kind} for {key} is {value}."


def question_text(kind: str, keys: list[str], values: int) -> str:
    """The question and its answer prefix (the model continues after it)."""
    if len(keys) == 1 and values == 1:
        return f" \nWhat is the magic {kind} for {keys[0]}? The {kind} for {keys[0]} is"
    if len(keys) == 1:
        return f" \nWhat are all the magic {kind}s for {keys[0]}? They are"
    return f" \nWhat are the magic {kind}s for {', '.join(keys)}? They are"


def _draw_needles(
    rng: np.random.Generator, keys: int, values: int, asked_keys: int, key_kind: str, value_kind: str, where: str
) -> tuple[list[str], dict[str, list[str]]]:
    """``keys`` distinct keys and each one's values, all distinct: ``values`` for the first ``asked_keys`` keys,
    one for the rest."""
    avoid: set[str] = set()
    key_names = []
    for _ in range(keys):  # distinct keys
        key = draw_new(lambda: draw_key(rng, key_kind), avoid.__contains__, f"{where}: keys")
        avoid.add(key)
        key_names.append(key)
    needle_values: dict[str, list[str]] = {}
    taken: set[str] = set()
    for key in key_names:
        row = []
        for _ in range(values if key in key_names[:asked_keys] else 1):
            value = draw_new(lambda: draw_value(rng, value_kind), taken.__contains__, f"{where}: values")
            taken.add(value)
            row.append(value)
        needle_values[key] = row
    return key_names, needle_values


def _questions(
    pieces: Pieces,
    value_kind: str,
    key_names: list[str],
    needle_values: dict[str, list[str]],
    queries: int,
    asks: int,
    values: int,
) -> list[Question]:
    """One question per ask, each about its own ``queries`` keys, answered by their values in order."""
    groups = [key_names[i * queries : (i + 1) * queries] for i in range(asks)]
    questions = []
    for group in groups:
        answers = [v for key in group for v in needle_values[key]]
        target = pieces.ids(" " + ", ".join(answers))
        ids = pieces.ids(question_text(value_kind, group, values))
        questions.append(Question(ids, tuple(answers), target, budget_for(target)))
    return questions


def niah_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    key_kind: str = "word",
    value_kind: str = "number",
    keys: int = 1,
    values: int = 1,
    queries: int = 1,
    asks: int = 1,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One needle-in-a-haystack sample of exactly ``length`` tokens (context and longest question).

    Args:
        task: the name recorded in the sample.
        haystack: the filler; with ``kind="needles"`` it is made of needles with other keys.
        key_kind: one of :data:`KEY_KINDS`.
        value_kind: one of :data:`VALUE_KINDS`.
        keys: keys that have needles (the rest are distractors in the text itself: RULER's multi-key).
        values: values stated for each asked key (multi-value).
        queries: keys asked in one question (multi-query).
        asks: separate questions about the same context, each about its own key (a shared prefill).
        depth: where the first asked needle goes; ``None`` draws it.
        include_answer: count the (first) question's canonical answer in ``length`` (training sequences).

    Raises:
        ValueError: ``length`` cannot hold the needles, the question and (if included) the answer; an unknown
            ``key_kind`` or ``value_kind``.
    """
    require_choice("key_kind", key_kind, KEY_KINDS)
    require_choice("value_kind", value_kind, VALUE_KINDS)
    asked_keys = queries * asks
    if keys < asked_keys:
        raise ValueError(f"keys ({keys}) must be at least queries x asks ({asked_keys})")
    where = f"task {task!r} at length {length:,}"
    key_names, needle_values = _draw_needles(rng, keys, values, asked_keys, key_kind, value_kind, where)
    avoid, taken = set(key_names), {v for row in needle_values.values() for v in row}
    first = float(rng.random()) if depth is None else float(depth)
    texts, depths = [], []
    for key in key_names:  # each key's values sorted by depth, so the text states them in the answer's order
        drawn = [first if not texts and i == 0 else float(rng.random()) for i in range(len(needle_values[key]))]
        pairs = sorted(zip(drawn, needle_values[key], strict=True), key=lambda pair: pair[0])
        needle_values[key] = [v for _, v in pairs]
        texts += [(key, v) for _, v in pairs]
        depths += [d for d, _ in pairs]
    needles = [pieces.ids(needle_text(value_kind, key, v)) for key, v in texts]
    questions = _questions(pieces, value_kind, key_names, needle_values, queries, asks, values)
    needle_tokens = sum(len(n) for n in needles)
    # a training sequence holds the first question and its answer; a sample for evaluation fits each question with
    # its answer (base.answer_room), the longest one exactly
    fixed = needle_tokens + (answer_room(questions[0]) if include_answer else max(answer_room(q) for q in questions))
    fill = length - fixed
    if fill < 0:
        raise too_short(task, length, fixed - 1)

    def distractor(r: np.random.Generator) -> str:
        key, value = draw_new(
            lambda: (draw_key(r, key_kind), draw_value(r, value_kind)),
            lambda pair: pair[0] in avoid or pair[1] in taken,
            f"{where}: distractor needles",
        )  # distractors may repeat each other, never an asked key or value
        return needle_text(value_kind, key, value)

    filler = Haystack(haystack.kind, haystack.text, distractor) if haystack.kind == "needles" else haystack
    stream, bounds = filler.stream(rng, fill, pieces)
    context, starts = insert_needles(stream, bounds, needles, depths)
    return Sample(task, context, tuple(questions), first, starts)
