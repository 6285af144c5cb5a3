"""The task suite: RULER's synthetic tasks by name (Hsieh et al., arXiv 2404.06654, table 2), QA left out, and the
tasks beyond literal retrieval that register themselves from their own files (:mod:`~ropekit.synthetic.latent`,
:mod:`~ropekit.synthetic.path`, :mod:`~ropekit.synthetic.ladder`; suite :data:`BEYOND`). RULER's (suite
:data:`RULER`) are what ``--tasks ruler`` and the defaults evaluate and what the tiny model trains on.

RULER's two QA tasks need SQuAD and HotpotQA downloads, and ropekit downloads nothing at run time, so they are not
here. Differences from RULER's own configuration, all so that every task fits the bundled model's 256-byte context:
shorter templates; ``niah_single_2`` asks for a word value (RULER: a number), so that the suite covers number, word
and UUID values; common-word extraction shows 3 common words 6 times each (RULER: 10 × 30).

Typical use::

    sample = make_sample("niah_multikey_1", length=4096, encode=model_encode, text=text_ids, seed=0, index=3)

Sample ``index`` of a task at a length is drawn from ``(seed, length, crc32(task name), index)``
(:func:`sample_rng`): a task's samples depend on its name only, not on which other tasks exist.

How to add a task: one :func:`register_task` call. A new variant of a generator is one line in the table below; a
task with its own generator is one new file in this package (``src/ropekit/synthetic/echo.py``) that registers
itself, as every module of the package that calls ``register_task(`` is imported when the task names are first
needed. Either way the task is at once in :func:`make_sample`, :func:`parse_tasks` (``eval tasks --tasks``) and
the evaluation::

    def echo_sample(name, rng, length, pieces, *, haystack, depth, include_answer, **params) -> Sample:
        ...  # a generator: the haystack and one question whose target is what the model must answer

    register_task(TaskSpec("echo", family="retrieval", haystack="noise", build=echo_sample))
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ropekit._registry import Registry
from ropekit.errors import InvalidArgument
from ropekit.synthetic.aggregation import common_words_sample, frequent_words_sample
from ropekit.synthetic.base import HAYSTACKS, Decode, Encode, Haystack, Pieces, Sample
from ropekit.synthetic.niah import niah_sample
from ropekit.synthetic.tracking import tracking_sample

#: the suite of RULER's synthetic tasks: what ``--tasks ruler`` (the default) evaluates and the tiny model trains on
RULER = "ruler"
#: the tasks beyond literal retrieval (latent hops, a long answer, the ladder): ``--tasks all`` adds them
BEYOND = "beyond"


@dataclass(frozen=True)
class TaskSpec:
    """One named task: its family, its haystack and the generator's parameters.

    Attributes:
        suite: :data:`RULER` (RULER's tasks: evaluated by default and mixed into training) or :data:`BEYOND`.
        seed_name: the name its samples are seeded by (:func:`sample_rng`; ``""``: its own): tasks that share one
            share their samples' random draws (the ladder's levels, the same needles).
        twins: the labels of the twin questions each sample holds beside its own
            (:attr:`~ropekit.synthetic.base.Question.twin`; the latent hops: ``("literal",)``).
    """

    name: str
    family: str
    haystack: str
    build: Callable[..., Sample]
    params: dict[str, Any] = field(default_factory=dict)
    suite: str = RULER
    seed_name: str = ""
    twins: tuple[str, ...] = ()

    def sample(
        self,
        rng: np.random.Generator,
        length: int,
        pieces: Pieces,
        text: np.ndarray | None,
        *,
        depth: float | None = None,
        include_answer: bool = False,
        haystack: str | None = None,
        **overrides: Any,
    ) -> Sample:
        """Sample of exactly ``length`` tokens from ``self.build``, called as ``build(name, rng, length, pieces, *,
        haystack, depth, include_answer, **params)``. ``include_answer`` (training sequences, :func:`mixture_sample`)
        counts the first question's answer in ``length``; every generator takes it, and those whose answer always
        fits (variable tracking, the word lists) return the same sample either way."""
        kind = haystack or self.haystack
        if kind not in HAYSTACKS:
            raise ValueError(f"haystack must be one of {', '.join(HAYSTACKS)}, got {kind!r}")
        if kind == "text" and text is None:
            raise ValueError("a text haystack needs the evaluation text's token ids, got none")
        return self.build(
            self.name,
            rng,
            length,
            pieces,
            haystack=Haystack(kind, text),
            depth=depth,
            include_answer=include_answer,
            **{**self.params, **overrides},
        )


def _niah(name: str, haystack: str, **params: Any) -> TaskSpec:
    return TaskSpec(name, "retrieval", haystack, niah_sample, params)


#: every task by name, in registration order (RULER's order for the built-in ones)
TASKS: Registry[TaskSpec] = Registry("task", home="ropekit.synthetic", marker="register_task(")


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add ``spec`` to :data:`TASKS` under ``spec.name``.

    Raises:
        ValueError: the name is empty or taken.
    """
    return TASKS.register(spec.name, spec)


for _spec in (
    _niah("niah_single_1", "noise", value_kind="number"),
    _niah("niah_single_2", "text", value_kind="word"),
    _niah("niah_single_3", "text", value_kind="uuid"),
    _niah("niah_multikey_1", "text", keys=4),
    _niah("niah_multikey_2", "needles"),
    _niah("niah_multikey_3", "needles", key_kind="uuid", value_kind="uuid"),
    _niah("niah_multivalue", "text", values=4),
    _niah("niah_multiquery", "text", keys=4, queries=4),
    TaskSpec("vt", "tracing", "noise", tracking_sample, {"chains": 1, "hops": 4}),
    TaskSpec("cwe", "aggregation", "noise", common_words_sample, {"common": 3, "freq_common": 6, "freq_uncommon": 2}),
    TaskSpec("fwe", "aggregation", "noise", frequent_words_sample, {"alpha": 2.0, "top": 3}),
):
    register_task(_spec)


def suite_tasks(suite: str = RULER) -> tuple[str, ...]:
    """The names of the tasks of ``suite``, in registration order."""
    return tuple(name for name, spec in TASKS.items() if spec.suite == suite)


#: the words ``--tasks`` takes for a whole set of tasks
TASK_SETS = ("ruler", "all")


def parse_tasks(text: str) -> tuple[str, ...]:
    """Task names from a comma-separated list (``ruler``: RULER's tasks; ``all``: every task).

    Raises:
        ValueError: an empty list or an unknown name (the message lists the valid ones).
    """
    items = [t.strip() for t in str(text).split(",")]
    names = TASKS.names()
    if items == ["all"]:
        return names
    if items == [RULER]:
        return suite_tasks(RULER)
    valid = ", ".join((*TASK_SETS, *names))
    if not all(items):
        raise ValueError(f"tasks must be comma-separated names, got {text!r}; valid: {valid}")
    for item in items:
        if item not in names:
            raise ValueError(f"unknown task {item!r}; valid: {valid}")
    return tuple(dict.fromkeys(items))


def task_seed(task: str) -> int:
    """The task's part of its samples' seed: CRC-32 of its name (stable across runs, processes and platforms,
    unlike ``hash``), so adding or reordering tasks leaves every other task's samples as they were."""
    return zlib.crc32(task.encode("utf-8"))


def sample_rng(seed: int, length: int, task: str, index: int) -> np.random.Generator:
    """The generator of sample ``index`` of ``task`` at ``length``: a pure function of the four (the task by its
    name, :func:`task_seed`)."""
    return np.random.default_rng([seed, length, task_seed(task), index])


def make_sample(
    task: str,
    length: int,
    encode: Encode,
    *,
    text: np.ndarray | None = None,
    seed: int = 0,
    index: int = 0,
    depth: float | None = None,
    pieces: Pieces | None = None,
    decode: Decode | None = None,
    **overrides: Any,
) -> Sample:
    """Sample ``index`` of ``task`` at ``length`` tokens for the tokenizer ``encode`` (bytes → ids), by seed.

    Args:
        text: token ids of the evaluation text, for text haystacks.
        depth: needle depth (``None``: drawn, as RULER does).
        pieces: a shared encoding cache (made from ``encode`` and ``decode`` when ``None``).
        decode: token ids → text, where a text haystack may be cut so that the sample re-tokenises
            (:meth:`~ropekit.synthetic.base.Pieces.cuts`; without it a text haystack is cut at any token).
        overrides: generator parameters (``haystack``, ``keys``, ``asks``, ``hops``, …).
    """
    spec = TASKS.get(task)
    rng = sample_rng(seed, length, spec.seed_name or task, index)
    return spec.sample(rng, length, pieces or Pieces(encode, decode), text, depth=depth, **overrides)


def check_task_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` as a ``{task: weight}`` dict over every training task (RULER's suite; a task not named weighs 1).

    Raises:
        ValueError: a task that is not a training task (the message lists the valid ones), a weight that is not a
            finite number >= 0, or every weight 0.
    """
    if not isinstance(weights, Mapping):
        raise ValueError(f"task_weights must map task names to weights, e.g. {{'vt': 2}}, got {weights!r}")
    training = suite_tasks(RULER)
    for name, weight in weights.items():
        if name not in training:
            message = f"task_weights: unknown task {name!r}; valid (RULER's tasks): {', '.join(training)}"
            raise InvalidArgument("task_weights", name, allowed=training, message=message)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            message = f"task_weights: {name}={weight!r}; a weight must be a finite number >= 0"
            raise InvalidArgument("task_weights", {name: weight}, allowed="finite numbers >= 0", message=message)
    full = {name: float(weights.get(name, 1.0)) for name in training}
    if not any(full.values()):
        raise ValueError(f"task_weights: every task weighs 0 ({dict(weights)!r}); at least one must be above 0")
    return full


def pick_task(rng: np.random.Generator, weights: Mapping[str, float] | None = None) -> str:
    """A training task's name (RULER's suite): uniform without ``weights`` (one ``rng.integers`` draw, the order
    earlier runs saw), else with probability proportional to :func:`check_task_weights`' weights."""
    names = list(suite_tasks(RULER))
    if weights is None:
        return names[int(rng.integers(len(names)))]
    full = check_task_weights(weights)
    p = np.array([full[name] for name in names])
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def mixture_sample(
    rng: np.random.Generator,
    length: int,
    text: np.ndarray,
    pieces: Pieces,
    weights: Mapping[str, float] | None = None,
) -> tuple[np.ndarray, int]:
    """A training sequence of exactly ``length`` tokens: a random task (:func:`pick_task`, ``weights`` relative,
    uniform by default), haystack and depth, with its answer last.

    Used to train the bundled model on the suite; the haystack is the task's own or the training text. Returns the
    sequence and the answer's length in tokens (the answer is the sequence's last tokens).
    """
    spec = TASKS.get(pick_task(rng, weights))
    haystack = spec.haystack if rng.random() < 0.5 else ("text" if spec.haystack != "text" else "noise")
    sample = spec.sample(rng, length, pieces, text, include_answer=True, haystack=haystack)
    return sample.sequence(), len(sample.questions[0].target)
