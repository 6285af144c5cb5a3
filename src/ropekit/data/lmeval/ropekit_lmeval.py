"""lm-evaluation-harness tasks holding ropekit's RULER-style samples (``ropekit eval tasks --write-lm-eval DIR``).

ropekit copies this file, unchanged, into the task folder beside ``samples.jsonl`` and the task YAMLs; lm-eval
imports it from there (``!function ropekit_lmeval....``). It needs lm-eval (and the ``datasets`` package lm-eval
installs), not ropekit.

- ``samples.jsonl``: one line per question: ``input`` (the context and the question as text that the model's tokenizer
  turns back into exactly ropekit's token ids; ropekit checked it when writing), ``outputs`` (the references),
  ``max_length`` (the sample's length in tokens), ``max_gen_toks`` (its greedy budget), ``ropekit_task`` and the
  sample's place (``sample``, ``question``).
- Scoring is lm-eval's own RULER scoring (``lm_eval/tasks/ruler/common_utils.py``): the output stripped and its control
  characters turned into newlines, then ``string_match_all`` (the fraction of references found, case-insensitive;
  ``string_match_part`` for a question whose ``metric`` is ``part``: any reference found; for ``prefix``, a long
  answer's lines, the fraction right in order before the first wrong one). Each task reports one metric per length,
  named by the length, as lm-eval's ``ruler`` tasks do: a sample scores its own length's metric and ``-1`` for the
  others, which :func:`aggregate` leaves out.
- A question with a ``twin`` label (the latent hops' literal twins) belongs to a task of its own
  (``ropekit_<task>_<twin>``), left out of the group's mean.
- Each question is generated greedily to its own budget (:class:`RopekitTask` puts ``max_gen_toks`` per request), as
  ropekit decodes it; the YAML's ``max_gen_toks`` is the task's largest budget.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from lm_eval.api.task import ConfigurableTask

SAMPLES = Path(__file__).resolve().parent / "samples.jsonl"
CONTROL = re.compile(r"[\x00-\x1f]")


@cache
def _docs() -> tuple[dict[str, Any], ...]:
    with SAMPLES.open(encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines if line.strip())


@cache
def _lengths() -> tuple[int, ...]:
    return tuple(sorted({int(doc["max_length"]) for doc in _docs()}))


def load_docs(ropekit_task: str, twin: str = "", **metadata: Any) -> dict[str, Any]:
    """The ``test`` split of one task's own questions, or of its ``twin`` questions (lm-eval's ``custom_dataset``;
    ``metadata``: what lm-eval passes, unused)."""
    import datasets

    docs = [doc for doc in _docs() if doc["ropekit_task"] == ropekit_task and doc.get("twin", "") == twin]
    if not docs:
        raise ValueError(f"{SAMPLES} holds no sample of task {ropekit_task!r}" + (f" ({twin})" if twin else ""))
    return {"test": datasets.Dataset.from_list(docs)}


def postprocess(prediction: str) -> str:
    """lm-eval's RULER post-processing of one output (``postprocess_pred``)."""
    return CONTROL.sub("\n", prediction.strip()).strip()


def prefix(prediction: str, lines: list[str]) -> float:
    """The fraction of the answer's ``lines`` that the output's lines give, in order, before the first wrong one
    (each stripped, blank ones skipped, case-insensitive): a long answer scored by its correct prefix."""
    given = [line.strip().lower() for line in prediction.splitlines() if line.strip()]
    right = 0
    for line, reference in zip(given, lines, strict=False):
        if line != reference.strip().lower():
            break
        right += 1
    return right / len(lines)


def score(prediction: str, references: list[str], metric: str = "all") -> float:
    """``string_match_all`` (``metric="all"``), ``string_match_part`` (``"part"``) or the correct prefix of an
    answer's lines (``"prefix"``: :func:`prefix`) of one output, case-insensitive."""
    if metric == "prefix":
        return prefix(postprocess(prediction), references)
    text = postprocess(prediction).lower()
    found = [reference.lower() in text for reference in references]
    return sum(found) / len(found) if metric == "all" else float(any(found))


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """The sample's score under its length's metric, ``-1`` under the others (lm-eval's ``ruler`` convention)."""
    metrics = {str(length): -1.0 for length in _lengths()}
    metrics[str(doc["max_length"])] = score(results[0], list(doc["outputs"]), doc.get("metric", "all"))
    return metrics


def aggregate(values: list[float]) -> float:
    """The mean over the samples of one length (the ``-1`` of the other lengths left out); ``-1`` when none."""
    kept = [value for value in values if value != -1]
    return sum(kept) / len(kept) if kept else -1.0


class RopekitTask(ConfigurableTask):
    """lm-eval's YAML task, each request given its question's own greedy budget (``max_gen_toks`` of the doc)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # lm-eval hands a ``class:`` task its whole YAML, ``class`` included, which its TaskConfig does not take
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> Any:
        requests = super().construct_requests(doc, ctx, **kwargs)
        for request in requests if isinstance(requests, list) else [requests]:
            context, options, *rest = request.arguments
            request.arguments = (context, {**options, "max_gen_toks": int(doc["max_gen_toks"])}, *rest)
        return requests
