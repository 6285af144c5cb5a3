"""The task evaluation: every method × length × task, greedy answers scored as RULER does, and the summary.

Samples depend only on (seed, length, task, index) and the tokenizer, so every method answers the same ones; they
are all generated (and every length checked) before the model runs. Each sample's context is prefilled once and
its questions are asked after it (:mod:`ropekit.eval.tasks.decode`).

Typical use::

    settings = TaskSettings(methods=("none", "yarn"), multiples=(1, 2, 4), samples=20)
    result = run_tasks(model, settings)           # model: an EvalModel (tiny or transformers)
    summary = result.summary()                    # means per (method, length), effective lengths
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ropekit._free_memory import available_memory
from ropekit._validate import require_float, require_int
from ropekit.errors import InvalidArgument
from ropekit.eval.methods import check_params
from ropekit.eval.parallel import ONE_PROCESS, Launched, OneProcess
from ropekit.eval.protocol import EvalModel
from ropekit.eval.tasks import limits
from ropekit.eval.tasks.grid import add_rows, answer_units, sample_cost, task_units
from ropekit.eval.tasks.limits import LEARNED, MULTIPLES, RULER_THRESHOLD, SAMPLES
from ropekit.eval.tasks.scoring import effective_lengths, paired_counts, pooled
from ropekit.eval.text import TokenizedText, shipped_text, tokenize
from ropekit.synthetic.base import ANSWER_SLACK, Pieces, Sample
from ropekit.synthetic.suite import RULER, TASKS, make_sample, suite_tasks


@dataclass(frozen=True, kw_only=True)
class TaskSettings:
    """What to evaluate.

    Attributes:
        methods: scaling and attention methods (as ``--methods``: ``yarn``, ``self_extend``, ``yarn+self_extend``).
        tasks: task names (:data:`ropekit.synthetic.suite.TASKS`; default: RULER's).
        multiples: lengths as multiples of the training length (ignored when ``lengths`` is given).
        lengths: lengths in tokens.
        samples: samples per (length, task).
        depth: needle depth for every sample (``None``: drawn per sample, as RULER does).
        threshold: the effective-length threshold in percent (RULER's 85.6).
        params: the attention methods' parameters (as ``--param``; the rest derived per length).
    """

    methods: tuple[str, ...]
    tasks: tuple[str, ...] = suite_tasks(RULER)
    multiples: tuple[float, ...] = MULTIPLES
    lengths: tuple[int, ...] | None = None
    samples: int = SAMPLES
    seed: int = 0
    depth: float | None = None
    factor: float | str = "auto"
    threshold: float = RULER_THRESHOLD
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("methods must name at least one method, got none")
        check_params(tuple(self.methods), dict(self.params))
        if not self.tasks:
            raise ValueError("tasks must name at least one task, got none")
        for task in self.tasks:
            if task not in TASKS:
                raise ValueError(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
        if not self.multiples:
            raise InvalidArgument("multiples", self.multiples, "must hold at least one multiple of the training length")
        for value in self.multiples:
            require_float("multiples", value, above=0.0)
        if self.lengths is not None and not self.lengths:
            rule = "must hold at least one length in tokens (None: the multiples of the training length)"
            raise InvalidArgument("lengths", self.lengths, rule)
        for value in self.lengths or ():
            require_int("lengths", value, minimum=1)
        require_int("samples", self.samples, minimum=1)
        require_int("seed", self.seed, minimum=0)
        if self.depth is not None and not 0.0 <= require_float("depth", self.depth) <= 1.0:
            raise ValueError(f"depth must be in [0, 1] (0 = start of the haystack), got {self.depth!r}")
        if not 0.0 < require_float("threshold", self.threshold) <= 100.0:
            raise ValueError(f"threshold must be in (0, 100] (percent), got {self.threshold!r}")

    def token_lengths(self, train_length: int) -> list[int]:
        """The lengths in tokens: ``lengths``, or each multiple of ``train_length`` rounded down.

        Raises:
            ValueError: a multiple so large that its length is not a finite number.
        """
        if self.lengths:
            return sorted(set(self.lengths))
        for m in self.multiples:
            if not math.isfinite(m * train_length):
                raise ValueError(f"multiple {m:g} of the training length {train_length:,} is not a finite length")
        return sorted({int(m * train_length) for m in self.multiples})

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "params": dict(self.params)}


def check_plan(model: EvalModel, settings: TaskSettings) -> list[int]:
    """The evaluation's lengths, checked before any sample is built (:func:`ropekit.eval.tasks.limits.check_lengths`):
    within ``model.max_positions`` where the model has such a limit, and every sample within memory.

    Raises:
        ValueError: a length beyond the model's positions, samples that need more memory than is free, or a
            multiple too large to be a length.
    """
    lengths = settings.token_lengths(model.train_length)
    limits.check_lengths(
        lengths,
        tasks=len(settings.tasks),
        samples=settings.samples,
        slack=ANSWER_SLACK
        - 1,  # greedy_answer feeds a wrong answer's tokens but the last (budget: the answer's + slack)
        max_positions=model.max_positions,
        free_memory=available_memory(),  # the host's: samples are built there
    )
    return lengths


def model_pieces(model: EvalModel) -> Pieces:
    """The pieces of ``model``'s samples: its tokenizer both ways (decoding tells where a text haystack is cut)."""
    return Pieces(lambda b: model.encode(b).numpy(), model.detokenize)


def make_samples(
    model: EvalModel, settings: TaskSettings, text: TokenizedText | None = None
) -> dict[tuple[int, str], list[Sample]]:
    """Every sample of the evaluation, per (length, task), for ``model``'s tokenizer (:func:`check_plan` first).

    Raises:
        ValueError: a length too short for a task (the message names both), a text too short for a haystack, or
            a plan :func:`check_plan` refuses.
    """
    check_plan(model, settings)
    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    ids = tokens.ids.numpy()
    pieces = model_pieces(model)
    out = {}
    for length in settings.token_lengths(model.train_length):
        for task in settings.tasks:
            out[length, task] = [
                make_sample(
                    task,
                    length,
                    pieces.encode,
                    text=ids,
                    seed=settings.seed,
                    index=i,
                    depth=settings.depth,
                    pieces=pieces,
                )
                for i in range(settings.samples)
            ]
    return out


def fitting_tasks(model: EvalModel, settings: TaskSettings, text: TokenizedText | None = None) -> dict[str, str]:
    """The tasks of ``settings`` that cannot be built at its shortest length for ``model``, with the reason (the
    report leaves them out instead of failing; ``ropekit eval tasks`` refuses them).

    Raises:
        ValueError: a plan :func:`check_plan` refuses (checked first, so that nothing is built for it).
    """
    check_plan(model, settings)
    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    ids = tokens.ids.numpy()
    pieces = model_pieces(model)
    shortest = min(settings.token_lengths(model.train_length))
    dropped = {}
    for task in settings.tasks:
        try:
            make_sample(task, shortest, pieces.encode, text=ids, seed=settings.seed, pieces=pieces)
        except ValueError as error:
            dropped[task] = str(error)
    return dropped


@dataclass
class TaskResult:
    """Rows per (method, length, task) and the run's context; :meth:`summary` adds means and effective lengths."""

    context: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return summarise(self.rows, self.context["train_length"], self.context["settings"]["threshold"])

    def to_dict(self) -> dict[str, Any]:
        return {"context": self.context, "rows": self.rows, "skipped": self.skipped, "summary": self.summary()}

    def write(self, directory: Path) -> None:
        """``tasks.json`` (rows, summary, context) in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tasks.json").write_text(json.dumps(self.to_dict(), indent=1) + "\n")


#: the method whose score at the training length is the model's own: plain RoPE, nothing changed
OWN_METHOD = "none"
#: what the summary says when ``none`` was not run
NOT_JUDGED = (
    f"no '{OWN_METHOD}' among the methods: which tasks the model has not learned, and the relative effective "
    f"lengths, need the model's own score at its training length (add {OWN_METHOD} to the methods)"
)


def summarise(rows: list[dict[str, Any]], train_length: int, threshold: float) -> dict[str, Any]:
    """Means over tasks per (method, length), the tasks the model did not learn, and effective lengths.

    A task is *not learned* when the model's own score at its training length (method ``none``) is below
    :data:`LEARNED`; the means are given over all tasks (RULER) and over the learned ones, and each method's relative
    threshold is the threshold times the model's own mean at its training length. Without ``none`` neither is
    judged (``own_method`` and ``not_learned`` are ``None``, ``note`` says why, there is no ``learned`` subset and no
    relative effective length): a method's score at the training length is the method's, and judging the model by
    it would blame the model for the method's failures (ReRoPE with a window of 1 fails every task at 1x).
    """
    methods = list(dict.fromkeys(r["method"] for r in rows))
    own = OWN_METHOD if OWN_METHOD in methods else None
    at_train = {r["task"]: r["score"] for r in rows if r["method"] == own and r["length"] == train_length}
    not_learned = sorted(t for t, s in at_train.items() if s < LEARNED) if own is not None else None
    means, effective = [], []
    for subset in ("all", "learned") if own is not None else ("all",):
        tables: dict[str, dict[int, dict[str, Any]]] = {}  # method -> length -> pooled mean over the subset's tasks
        for method in methods:
            for length in sorted({r["length"] for r in rows if r["method"] == method}):
                cells = [
                    r
                    for r in rows
                    if r["method"] == method
                    and r["length"] == length
                    and (subset == "all" or r["task"] not in not_learned)
                ]
                if cells:
                    tables.setdefault(method, {})[length] = pooled(cells)
                    means.append({"method": method, "length": length, "subset": subset, **tables[method][length]})
        reference = tables.get(own, {}).get(train_length, {}).get("score") if own is not None else None
        for method, per_length in tables.items():
            effective.append(
                {"method": method, "subset": subset, **effective_lengths(per_length, threshold, reference)}
            )
    summary = {"own_method": own, "not_learned": not_learned, "means": means, "effective": effective}
    if any("twins" in r for r in rows):
        summary["twins"] = twin_gaps(rows)
    return summary if own is not None else {**summary, "note": NOT_JUDGED}


def twin_gaps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, length, twin): the twin's score minus the tasks' own, pooled over the tasks that have that twin
    (their pair counts added; :func:`~ropekit.eval.tasks.scoring.paired_counts`), with each side's pooled mean."""
    out = []
    keys = dict.fromkeys((r["method"], r["length"], label) for r in rows for label in r.get("twins", {}))
    for method, length, label in keys:
        cells = [r for r in rows if r["method"] == method and r["length"] == length and label in r.get("twins", {})]
        counts = [sum(r["twins"][label]["gap"]["counts"][k] for r in cells) for k in range(4)]
        out.append(
            {
                "method": method,
                "length": length,
                "twin": label,
                "tasks": [r["task"] for r in cells],
                "own": pooled(cells),
                label: pooled([r["twins"][label] for r in cells]),
                "gap": paired_counts(counts),
            }
        )
    return out


def _context(model: EvalModel, settings: TaskSettings, tokens: TokenizedText) -> dict[str, Any]:
    """What a task result records about its run: versions, the model, the text and the settings."""
    from ropekit import __version__

    return {
        "ropekit_version": __version__,
        "model": model.describe(),
        "eval_text": tokens.source,
        "eval_text_sha256": tokens.sha256,
        "settings": settings.to_dict(),
        "train_length": model.train_length,
    }


def run_tasks(
    model: EvalModel,
    settings: TaskSettings,
    *,
    text: TokenizedText | None = None,
    samples: dict[tuple[int, str], list[Sample]] | None = None,
    on_tokens: Callable[[int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    processes: OneProcess | Launched = ONE_PROCESS,
) -> TaskResult:
    """Evaluate every (method, length, task) of ``settings`` on ``model``.

    Args:
        samples: from :func:`make_samples` (made here when ``None``).
        on_tokens: called with the forward tokens of each finished sample (for a progress bar in tokens).
        on_step: called with a short label after each sample.
        processes: where the samples are answered (:mod:`ropekit.eval.parallel`; default: all in this process). The
            result is the same, on every process.
    """
    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    samples = samples if samples is not None else make_samples(model, settings, tokens)
    result = TaskResult(_context(model, settings, tokens))
    lengths = settings.token_lengths(model.train_length)
    units = task_units(settings, lengths, samples)
    costs = [sample_cost(samples[n, t][i]) for _, n, t, i in units]
    outcomes = processes.map(
        costs,
        lambda mine: answer_units(model, settings, samples, units, mine, on_tokens=on_tokens, on_step=on_step),
    )
    add_rows(result, settings, lengths, samples, units, outcomes)
    result.context["model"].update(model.ran_as())
    return result


def task_forward_tokens(samples: dict[tuple[int, str], list[Sample]], methods: int) -> int:
    """Forward tokens of the whole evaluation when every answer takes the shortcut (see :func:`sample_cost`)."""
    return methods * sum(sample_cost(s) for group in samples.values() for s in group)
