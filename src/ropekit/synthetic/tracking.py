"""Variable tracking, RULER's multi-hop tracing task (Hsieh et al., arXiv 2404.06654, section 3.2).

A chain ``VAR A = 12345. VAR B = VAR A. VAR C = VAR B. …`` is scattered through the haystack in order; the
question asks for every variable that holds the value, so the model must follow each hop. ``chains`` chains with
their own values are hidden (the first one is asked); ``hops`` assignments follow each value.

Placement: the chain's first statement (the value) goes at ``depth`` (drawn when ``None``); its hops at sorted
uniform depths after it; the other chains anywhere, each in order.
"""

from __future__ import annotations

import numpy as np

from ropekit.synthetic.base import (
    Haystack,
    Pieces,
    Question,
    Sample,
    answer_room,
    budget_for,
    draw_new,
    insert_needles,
    too_short,
)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def variable_names(rng: np.random.Generator, count: int, where: str = "variable names") -> list[str]:
    """``count`` distinct five-letter upper-case names (RULER's variable names)."""
    names: dict[str, None] = {}  # ordered, with set lookups
    for _ in range(count):
        names[draw_new(lambda: "".join(LETTERS[i] for i in rng.integers(0, 26, 5)), names.__contains__, where)] = None
    return list(names)


def question_text(value: str) -> str:
    return f" \nWhich variables are assigned the value {value}? They are"


def tracking_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    chains: int = 1,
    hops: int = 4,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One variable-tracking sample of exactly ``length`` tokens (``include_answer`` does not change the sample: its
    one answer always fits the length, :func:`~ropekit.synthetic.base.answer_room`).

    Raises:
        ValueError: ``chains`` or ``hops`` < 1, or ``length`` too short for the chains and the question.
    """
    if chains < 1 or hops < 1:
        raise ValueError(f"chains and hops must be >= 1, got chains={chains}, hops={hops}")
    where = f"task {task!r} at length {length:,}"
    names = variable_names(rng, chains * (hops + 1), f"{where}: variable names")
    drawn: dict[str, None] = {}
    for _ in range(chains):
        drawn[draw_new(lambda: str(int(rng.integers(10000, 100000))), drawn.__contains__, f"{where}: values")] = None
    values = list(drawn)
    statements, depths = [], []
    first = float(rng.random()) if depth is None else float(depth)
    for c in range(chains):
        chain = names[c * (hops + 1) : (c + 1) * (hops + 1)]
        start = first if c == 0 else float(rng.random())
        later = sorted(start + (1 - start) * float(rng.random()) for _ in range(hops))
        text = [f" VAR {chain[0]} = {values[c]}."] + [  # each statement's space in front (base: pieces)
            f" VAR {chain[i]} = VAR {chain[i - 1]}." for i in range(1, hops + 1)
        ]
        statements += [pieces.ids(t) for t in text]
        depths += [start, *later]
    asked = names[: hops + 1]
    target = pieces.ids(" " + " ".join(asked))
    question = Question(pieces.ids(question_text(values[0])), tuple(asked), target, budget_for(target))
    fixed = sum(len(s) for s in statements) + answer_room(question)
    fill = length - fixed
    if fill < 0:
        raise too_short(task, length, fixed - 1)
    filler = Haystack("noise") if haystack.kind == "needles" else haystack
    stream, bounds = filler.stream(rng, fill, pieces)
    context, starts = insert_needles(stream, bounds, statements, depths)
    return Sample(task, context, (question,), first, starts)
