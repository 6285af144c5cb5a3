"""Path traversal: follow k links, one line per step, a long answer (LongProc's path traversal: Ye et al., arXiv
2501.05414, with invented places instead of its city routes).

The context states one door per place, each a sentence at a random depth among distractor doors::

    " The door of Bakiro leads to Semufa."

The question gives a start and a count, and the answer is the doors passed, in order, one sentence a line::

    " \\nStart at Bakiro and go through 3 doors in turn, one line per door:"
    " \\nThe door of Bakiro leads to Semufa. \\nThe door of Semufa leads to Tolevi. \\nThe door of Tolevi leads to ..."

Every place of the path has exactly one door, and the distractor doors join other places only, so the path is one.
The answer takes about ``answer_share`` of the sample's length (a third by default: as many steps as fit), so it is
generated at the sample's last positions, and its own length grows with the sample's: at lengths past the model's
training length the output itself runs past it. Scored by the fraction of lines right before the first wrong one
(``metric="prefix"``; a sample is exact when every line is right).

Placement: the first door at ``depth`` (drawn when ``None``), the others at uniformly random depths.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ropekit.synthetic.base import (
    Haystack,
    Pieces,
    Question,
    Sample,
    budget_for,
    draw_new,
    insert_needles,
    random_word,
    too_short,
)
from ropekit.synthetic.suite import BEYOND, TaskSpec, register_task
from ropekit.synthetic.words import template_words


def link_text(place: str, next_place: str) -> str:
    return f" The door of {place} leads to {next_place}."


def line_text(place: str, next_place: str) -> str:
    """One line of the answer: the door's sentence on a line of its own."""
    return f" \n{link_text(place, next_place)[1:]}"


def question_text(start: str, steps: int) -> str:
    return f" \nStart at {start} and go through {steps} doors in turn, one line per door:"


def _path(
    task: str, rng: np.random.Generator, length: int, pieces: Pieces, answer_share: float
) -> tuple[list[str], list[np.ndarray], list[np.ndarray], np.ndarray]:
    """The longest path that fits: its places, its doors' and its lines' ids, and the question's ids. Steps are added
    while the answer stays within ``answer_share`` of ``length`` and the doors, question and answer within it.

    Raises:
        ValueError: not even one step fits (:func:`~ropekit.synthetic.base.too_short`).
    """
    where = f"task {task!r} at length {length:,}: places"
    taken = template_words(link_text("", ""), question_text("", 0))
    places = [draw_new(lambda: random_word(rng, 3).capitalize(), taken.__contains__, where)]
    taken.add(places[0])
    links: list[np.ndarray] = []
    lines: list[np.ndarray] = []
    question = pieces.once(question_text(places[0], 0))
    answer = used = 0
    while True:
        nxt = draw_new(lambda: random_word(rng, 3).capitalize(), taken.__contains__, where)
        link, line = pieces.once(link_text(places[-1], nxt)), pieces.once(line_text(places[-1], nxt))
        asked = pieces.once(question_text(places[0], len(lines) + 1))
        if answer + len(line) > answer_share * length or used + len(link) + len(line) + len(asked) > length:
            if not lines:  # not even one step: the length this one needs
                need = max(len(link) + len(line) + len(asked), math.ceil(len(line) / answer_share))
                raise too_short(task, length, need - 1)
            return places, links, lines, question
        taken.add(nxt)
        places.append(nxt)
        links.append(link)
        lines.append(line)
        question = asked
        answer += len(line)
        used += len(link) + len(line)


def path_traversal_sample(
    task: str,
    rng: np.random.Generator,
    length: int,
    pieces: Pieces,
    *,
    haystack: Haystack,
    answer_share: float = 1 / 3,
    depth: float | None = None,
    include_answer: bool = False,
) -> Sample:
    """One path-traversal sample of exactly ``length`` tokens (``include_answer`` does not change the sample: its
    answer always fits the length).

    Raises:
        ValueError: ``answer_share`` outside (0, 1), or ``length`` too short for one step.
    """
    if not (isinstance(answer_share, float | int) and math.isfinite(answer_share) and 0 < answer_share < 1):
        raise ValueError(f"answer_share must be a fraction in (0, 1), got {answer_share!r}")
    places, links, lines, question_ids = _path(task, rng, length, pieces, answer_share)
    where = f"task {task!r} at length {length:,}: distractor doors"
    target = np.concatenate(lines).astype(np.int64)
    answers = tuple(link_text(a, b)[1:] for a, b in itertools.pairwise(places))
    question = Question(question_ids, answers, target, budget_for(target), metric="prefix")
    fill = length - sum(len(x) for x in links) - len(question_ids) - len(target)
    path_places = set(places) | template_words(link_text("", ""), question_text("", 0))

    def distractor(r: np.random.Generator) -> str:  # a door between two places off the path
        a, b = (draw_new(lambda: random_word(r, 3).capitalize(), path_places.__contains__, where) for _ in "ab")
        return link_text(a, b)

    filler = Haystack(haystack.kind, haystack.text, distractor) if haystack.kind == "needles" else haystack
    first = float(rng.random()) if depth is None else float(depth)
    depths = [first, *(float(rng.random()) for _ in links[1:])]
    stream, bounds = filler.stream(rng, fill, pieces)
    context, starts = insert_needles(stream, bounds, links, depths)
    return Sample(task, context, (question,), first, starts)


register_task(TaskSpec("path_traversal", "long_output", "needles", path_traversal_sample, suite=BEYOND))
