"""The ladder: four levels of one task over the same needles (RULER v2's order: retrieve, copy a keyed item, copy
then compute, compute directly), so the level where a curve drops tells a retrieval failure from a reasoning one.

Every level's sample holds the same needles at the same depths (the four tasks are seeded by one name, ``ladder``,
and draw their needles first): ``keys`` needles ``" The code of Bafe is 417."`` (3-digit codes), two of them
asked. Only the question differs:

================== =========================================================== ===========================
task               question                                                    answer
================== =========================================================== ===========================
ladder_retrieve    ``What are the codes of Bafe and Kimo? They are``           ``417, 208``
ladder_copy        ``Copy the sentences that give the codes of Bafe and Kimo:`` both needles, word for word
ladder_copy_compute ``Write the codes of Bafe and Kimo, then their sum:``      ``417 + 208 = 625``
ladder_compute     ``What is the sum of the codes of Bafe and Kimo? It is``    ``625``
================== =========================================================== ===========================

Scored by string match (``copy then compute`` on the whole line ``417 + 208 = 625``, ``compute`` on the sum alone).
The haystack is the evaluation text; its length differs between levels by the questions' lengths only.
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

#: the levels, bottom to top
LEVELS = ("retrieve", "copy", "copy_compute", "compute")


def needle_text(key: str, code: int) -> str:
    return f" The code of {key} is {code}."


def question(level: str, a: str, b: str, code_a: int, code_b: int) -> tuple[str, str, tuple[str, ...]]:
    """The question of ``level`` about keys ``a`` and ``b``: its text, its canonical answer and its references."""
    total = code_a + code_b
    if level == "retrieve":
        return f" \nWhat are the codes of {a} and {b}? They are", f" {code_a}, {code_b}", (str(code_a), str(code_b))
    if level == "copy":
        lines = (needle_text(a, code_a)[1:], needle_text(b, code_b)[1:])
        return f" \nCopy the sentences that give the codes of {a} and {b}:", " " + " ".join(lines), lines
    if level == "copy_compute":
        line = f"{code_a} + {code_b} = {total}"
        return f" \nWrite the codes of {a} and {b}, then their sum:", " " + line, (line,)
    return f" \nWhat is the sum of the codes of {a} and {b}? It is", f" {total}", (str(total),)


def ladder_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    level: str = "retrieve",
    keys: int = 4,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One sample of the ladder's ``level`` (one of :data:`LEVELS`) of exactly ``length`` tokens (``include_answer``
    does not change the sample: its answer always fits the length).

    Raises:
        ValueError: an unknown ``level``, ``keys`` < 2, or ``length`` too short for the needles and the question.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if keys < 2:
        raise ValueError(f"keys must be at least 2 (two are asked), got {keys}")
    where = f"task {task!r} at length {length:,}"
    names: list[str] = []
    reserved = template_words(needle_text("", 0), *(question(level, "", "", 0, 0)[0] for level in LEVELS))
    for _ in range(keys):
        taken = reserved.union(names).__contains__
        names.append(draw_new(lambda: random_word(rng, 2).capitalize(), taken, f"{where}: keys"))
    codes: list[int] = []
    for _ in range(keys):
        codes.append(draw_new(lambda: int(rng.integers(100, 1000)), codes.__contains__, f"{where}: codes"))
    first = float(rng.random()) if depth is None else float(depth)
    depths = [first, *(float(rng.random()) for _ in names[1:])]
    needles = [pieces.once(needle_text(k, c)) for k, c in zip(names, codes, strict=True)]
    text, answer, refs = question(level, names[0], names[1], codes[0], codes[1])
    target = pieces.once(answer)
    asked = Question(pieces.once(text), refs, target, budget_for(target))
    fixed = sum(len(n) for n in needles) + answer_room(asked)
    if fixed > length:
        raise too_short(task, length, fixed - 1)
    filler = Haystack("noise") if haystack.kind == "needles" else haystack
    stream, bounds = filler.stream(rng, length - fixed, pieces)
    context, starts = insert_needles(stream, bounds, needles, depths)
    return Sample(task, context, (asked,), first, starts)


for _level in LEVELS:
    register_task(
        TaskSpec(
            f"ladder_{_level}", "ladder", "text", ladder_sample, {"level": _level}, suite=BEYOND, seed_name="ladder"
        )
    )
