"""The task evaluation's grid: one unit per (method, length, task, sample), answered unit by unit, and the rows they
make per (method, length, task).

A unit's outcome depends only on the unit (the model is set up for its method and length alone, each sample is
prefilled afresh), so any subset of units can be answered in any process (:mod:`ropekit.eval.parallel`) and the rows
made from the outcomes are those of one process answering them all in order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from ropekit.eval.methods import configured_groups
from ropekit.eval.protocol import AnswersAll, EvalModel
from ropekit.eval.tasks.decode import greedy_answer
from ropekit.eval.tasks.scoring import cell, paired_difference, score
from ropekit.synthetic.base import Sample
from ropekit.synthetic.suite import TASKS

#: (method, length, task, sample index)
Unit = tuple[str, int, str, int]
Samples = dict[tuple[int, str], list[Sample]]


def sample_cost(sample: Sample) -> int:
    """Forward tokens of one sample when every answer takes the shortcut (the prefill and each question with its
    canonical answer); a wrong answer adds up to its budget."""
    return len(sample.context) + sum(len(q.ids) + len(q.target) for q in sample.questions)


def task_units(settings: Any, lengths: list[int], samples: Samples) -> list[Unit]:
    """Every unit of the evaluation, in the order one process answers them."""
    return [
        (method, length, task, index)
        for method in settings.methods
        for length in lengths
        for task in settings.tasks
        for index in range(len(samples[length, task]))
    ]


def _answer_locally(model: EvalModel, sample: Sample) -> tuple[list[float], int, int]:
    """One sample decoded in this process: its context prefilled once, each question answered greedily from that
    prefix. Returns the questions' scores, how many answers stopped early, and the forward tokens."""
    decoder = model.decoder()
    if hasattr(decoder, "reserve"):  # a decoder of fixed room (llama.cpp's context): the longest answer's too
        decoder.reserve(len(sample.context) + max(len(q.ids) + q.budget for q in sample.questions))
    decoder.extend(torch.from_numpy(sample.context), keep=0)
    scores, shortcuts, forward = [], 0, len(sample.context)
    for question in sample.questions:
        refs = question.answers if model.byte_level else None  # exact early stop (decode.settled)
        answer = greedy_answer(decoder, question.ids, question.target, question.budget, model.stop_tokens, refs)
        forward += answer.forward_tokens
        shortcuts += answer.shortcut
        scores.append(score(model.detokenize(answer.tokens), question.answers, question.metric))
    return scores, shortcuts, forward


def _answer_group(
    model: EvalModel,
    run: dict[str, Any],
    group: list[Unit],
    samples: Samples,
    on_tokens: Callable[[int], None] | None,
    on_step: Callable[[str], None] | None,
) -> list[dict[str, Any]]:
    """The outcomes of ``group`` (units of one method and length, the model set up for them): locally, or from a
    server all at once (its bounded pool of requests)."""
    chosen = [samples[length, task][index] for _, length, task, index in group]
    served = None
    if isinstance(model, AnswersAll):
        progress = None if on_tokens is None else (lambda s: on_tokens(sample_cost(s)))
        served = model.answer_all(chosen, progress)
    outcomes = []
    for (method, length, task, _), sample in zip(group, chosen, strict=True):
        if served is not None:
            texts, forward = served[id(sample)]
            scores = [score(t, q.answers, q.metric) for t, q in zip(texts, sample.questions, strict=True)]
            shortcuts = 0
        else:
            scores, shortcuts, forward = _answer_locally(model, sample)
            if on_tokens is not None:
                on_tokens(sample_cost(sample))
        outcomes.append({"run": run, "scores": scores, "shortcuts": shortcuts, "forward": forward})
        if on_step is not None:
            on_step(f"{method} @ {length} {task}")
    return outcomes


def answer_units(
    model: EvalModel,
    settings: Any,
    samples: Samples,
    units: list[Unit],
    indices: list[int],
    *,
    on_tokens: Callable[[int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """The outcomes of ``units[i]`` for each ``i`` of ``indices`` (ascending): ``{"run", "scores", "shortcuts",
    "forward"}``, or ``{"skipped": reason}`` for a method that cannot run on ``model`` (its later lengths are then
    not tried). ``on_tokens`` gets each unit's forward tokens, ``on_step`` a label after each unit."""
    outcomes: list[dict[str, Any]] = []
    with configured_groups(model, units, indices, settings) as groups:
        for _, _, chunk, run, skipped in groups:
            group = [units[i] for i in chunk]
            if skipped is not None:
                outcomes += [{"skipped": skipped} for _ in group]
                if on_tokens is not None:  # keep a progress bar's total exact
                    on_tokens(sum(sample_cost(samples[n, t][i]) for _, n, t, i in group))
                continue
            outcomes += _answer_group(model, run, group, samples, on_tokens, on_step)
    return outcomes


def add_rows(
    result: Any, settings: Any, lengths: list[int], samples: Samples, units: list[Unit], outcomes: list[dict]
) -> None:
    """The rows per (method, length, task) from every unit's outcome, into ``result`` (its ``rows`` and
    ``skipped``), in the order of ``settings``; a method skipped at a length has no rows from there on."""
    by_unit = dict(zip(units, outcomes, strict=True))
    for method in settings.methods:
        for length in lengths:
            first = by_unit[method, length, settings.tasks[0], 0]
            if "skipped" in first:
                result.skipped.append({"method": method, "reason": first["skipped"]})
                break
            for task in settings.tasks:
                answered = [by_unit[method, length, task, i] for i in range(len(samples[length, task]))]
                result.rows.append(
                    {
                        "method": method,
                        **copy.deepcopy(answered[0]["run"]),
                        "length": length,
                        "task": task,
                        "family": TASKS[task].family,
                        **row_scores(samples[length, task], [a["scores"] for a in answered]),
                        "shortcut": sum(a["shortcuts"] for a in answered),
                        "forward_tokens": sum(a["forward"] for a in answered),
                    }
                )


def row_scores(group: list[Sample], scores: list[list[float]]) -> dict[str, Any]:
    """A row's scores from each sample's question scores: the task's own questions' cell (:func:`cell`); for a task
    scored by correct prefix, the share of exact answers (``exact``); per twin, its cell and its gap to the task's
    own score, paired by sample (``twins``: ``{"literal": {cell, "gap": paired_difference}}``)."""
    own = [
        s
        for sample, row in zip(group, scores, strict=True)
        for q, s in zip(sample.questions, row, strict=True)
        if not q.twin
    ]
    out: dict[str, Any] = cell(own)
    if any(q.metric == "prefix" for q in group[0].questions):
        out["exact"] = cell([float(s == 1.0) for s in own])
    labels = list(dict.fromkeys(q.twin for q in group[0].questions if q.twin))
    if labels:
        out["twins"] = {}
    for label in labels:
        pairs = [(s, t) for sample, row in zip(group, scores, strict=True) for s, t in _pairs(sample, row, label)]
        out["twins"][label] = {
            **cell([t for _, t in pairs]),
            "gap": paired_difference([s for s, _ in pairs], [t for _, t in pairs]),
        }
    return out


def _pairs(sample: Sample, row: list[float], label: str) -> list[tuple[float, float]]:
    """The (own, twin) score pairs of one sample: its own questions in order, each with the twin of that rank."""
    own = [s for q, s in zip(sample.questions, row, strict=True) if not q.twin]
    twin = [s for q, s in zip(sample.questions, row, strict=True) if q.twin == label]
    return list(zip(own, twin, strict=True))
