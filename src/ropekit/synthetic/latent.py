"""Latent hops: a needle the question reaches only through bridge facts, with a literal twin (NoLiMa's idea:
Modarressi et al., arXiv 2502.05167, built offline from invented words instead of world knowledge).

A chain is a needle and its bridges, each a sentence of its own, every name an invented pseudo-word::

    needle    " Kobaru lives next to Tesa."          (the person, the town: the needle's key word)
    hop 1     " Tesa is a town in Mivo."             (the town's region)
    hop 2     " Mivo lies in Pafelu."                (the region's land; latent_hop_2 only)

The question names the chain's last place and asks for the person: ``" \\nWho has a home in Mivo? It is"``
(``Pafelu`` with two hops). No word of it is in the needle (beyond stop words: ``in``, ``it``, ``is``...), so only
the bridges lead there, and they need no knowledge of the world. Its **literal twin** asks the same on the same
context with the needle's key word, ``" \\nWho has a home by Tesa? It is"``: scored beside the latent
question (:attr:`~ropekit.synthetic.base.Question.twin`), the gap between the two is what the missing literal match
costs. Other chains (``chains - 1`` of them, every name their own) are distractors: the question's place leads to
one person only.

Placement: the asked needle at ``depth`` (drawn when ``None``); every other sentence at a uniformly random depth, so a
bridge may come before or after its needle. The haystack is the evaluation text.
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
    random_word,
    too_short,
)
from ropekit.synthetic.suite import BEYOND, TaskSpec, register_task
from ropekit.synthetic.words import template_words


def needle_text(person: str, town: str) -> str:
    return f" {person} lives next to {town}."


def bridge_text(hop: int, place: str, container: str) -> str:
    """The bridge of ``hop`` (1: the town's region, 2: the region's land)."""
    return f" {place} is a town in {container}." if hop == 1 else f" {place} lies in {container}."


def question_text(place: str, literal: bool) -> str:
    """The latent question (the chain's last place) or its literal twin (the needle's town)."""
    where = "by" if literal else "in"
    return f" \nWho has a home {where} {place}? It is"


def _names(rng: np.random.Generator, chains: int, hops: int, where: str) -> list[list[str]]:
    """Per chain: its person (three syllables), its town, then one place per hop (two syllables each), all distinct,
    capitalised as names, and none a word of the templates."""
    taken = template_words(needle_text("", ""), bridge_text(1, "", ""), bridge_text(2, "", ""))
    taken |= template_words(question_text("", True), question_text("", False))
    out = []
    for _ in range(chains):
        row = []
        for syllables in (3, *([2] * (hops + 1))):
            word = draw_new(lambda s=syllables: random_word(rng, s).capitalize(), taken.__contains__, where)
            taken.add(word)
            row.append(word)
        out.append(row)
    return out


def latent_hop_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    hops: int = 1,
    chains: int = 3,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One latent-hop sample of exactly ``length`` tokens: the latent question, then its literal twin, after one
    context (``include_answer`` counts the latent question's answer only).

    Raises:
        ValueError: ``hops`` not 1 or 2, ``chains`` < 1, or ``length`` too short for the chains and the questions.
    """
    if hops not in (1, 2) or chains < 1:
        raise ValueError(f"hops must be 1 or 2 and chains >= 1, got hops={hops}, chains={chains}")
    where = f"task {task!r} at length {length:,}: names"
    names = _names(rng, chains, hops, where)
    first = float(rng.random()) if depth is None else float(depth)
    texts, depths = [], []
    for c, (person, town, *places) in enumerate(names):
        texts.append(needle_text(person, town))
        depths.append(first if c == 0 else float(rng.random()))
        chain = [town, *places]
        for hop in range(1, hops + 1):
            texts.append(bridge_text(hop, chain[hop - 1], chain[hop]))
            depths.append(float(rng.random()))
    statements = [pieces.once(t) for t in texts]
    person, town, *places = names[0]
    target = pieces.once(" " + person)
    questions = tuple(
        Question(pieces.once(question_text(place, literal)), (person,), target, budget_for(target), twin=twin)
        for place, literal, twin in ((places[-1], False, ""), (town, True, "literal"))
    )
    rooms = [answer_room(q) for q in questions]
    fixed = sum(len(s) for s in statements) + (rooms[0] if include_answer else max(rooms))
    if fixed > length:
        raise too_short(task, length, fixed - 1)
    filler = Haystack("noise") if haystack.kind == "needles" else haystack  # other needles would be other chains
    stream, bounds = filler.stream(rng, length - fixed, pieces)
    context, starts = insert_needles(stream, bounds, statements, depths)
    return Sample(task, context, questions, first, starts)


for _name, _hops in (("latent_hop", 1), ("latent_hop_2", 2)):
    register_task(
        TaskSpec(_name, "latent", "text", latent_hop_sample, {"hops": _hops}, suite=BEYOND, twins=("literal",))
    )
