"""The evolutionary search over :mod:`ropekit.search.space`, for any objective (factors → score, lower is better).

Generation 0 is the formula seeds, then mutants of them until the population is full. Each later generation keeps
the best ``parents`` candidates scored so far (elitism over the whole history, as LongRoPE's search keeps its top
k) and makes ``population`` children: a crossover of two parents then a mutation, or a mutation of one. A child
already scored is not scored again. Randomness comes from ``numpy.random.default_rng([seed, generation])``, so the
search is a function of its settings and the scores; :class:`~ropekit.search.journal.Journal` makes it resumable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ropekit._validate import require_int
from ropekit.search.journal import Journal
from ropekit.search.space import Candidate, Operators, crossover, mutate

#: how many times a generation retries a child that was already scored before giving up on it
RETRIES = 20


@dataclass(frozen=True)
class SearchSettings:
    """What the loop does (defaults and why: docs/search.md).

    Attributes:
        evaluations: the budget: how many candidates are scored in all (seeds included).
        population: children per generation (and generation 0's size).
        parents: how many of the best candidates so far breed.
        seed: the random seed.
        operators: mutation and crossover rates and step.
    """

    evaluations: int
    population: int = 16
    parents: int = 6
    seed: int = 0
    operators: Operators = field(default_factory=Operators)

    def __post_init__(self) -> None:
        require_int("evaluations", self.evaluations, minimum=1)
        require_int("population", self.population, minimum=2)
        require_int("parents", self.parents, minimum=1)
        require_int("seed", self.seed, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchTrace:
    """What a search did: every scored candidate in order, with its generation, and the best."""

    scored: list[tuple[Candidate, float, int]] = field(default_factory=list)

    @property
    def best(self) -> tuple[Candidate, float]:
        """The lowest score (the first of equal ones)."""
        index = min(range(len(self.scored)), key=lambda i: (self.scored[i][1], i))
        return self.scored[index][0], self.scored[index][1]

    def ranked(self, count: int) -> list[Candidate]:
        order = sorted(range(len(self.scored)), key=lambda i: (self.scored[i][1], i))
        return [self.scored[i][0] for i in order[:count]]

    def to_list(self) -> list[dict[str, Any]]:
        """Per evaluation: index, generation, score, the best score so far, critical pair and factors."""
        rows, best = [], float("inf")
        for index, (candidate, score, generation) in enumerate(self.scored):
            best = min(best, score)
            rows.append(
                {
                    "index": index,
                    "generation": generation,
                    "score": score,
                    "best": best,
                    "critical_pair": candidate.critical_pair,
                    "factors": candidate.factors,
                }
            )
        return rows


def run_search(
    objective: Callable[[Candidate], float],
    seeds: dict[str, Candidate],
    settings: SearchSettings,
    *,
    factor: float,
    journal: Journal | None = None,
    progress: Callable[[int, float], None] | None = None,
    processes: Any = None,
) -> SearchTrace:
    """Search until ``settings.evaluations`` candidates are scored; return the trace.

    A generation's candidates are made before any of them is scored (a child depends on the scores of the
    generations before it, never on its siblings'), then scored: in one process one after the other, under a
    launch in shares, one per process (``processes.map``), every process getting every score. So the trace is the
    same whatever the number of processes.

    Args:
        objective: candidate → score (lower is better); called once per new candidate, in the process that scores it.
        seeds: generation 0's first members, in order (the formulas).
        factor: s, which the candidates are held to from their critical pair on.
        journal: scores already made (a resumed search) and where new ones are appended (by the main process, each
            as soon as it has it).
        progress: called (in the main process) with (evaluations done, best score so far) as each score is known.
        processes: the processes that score (:mod:`ropekit.eval.parallel`; ``None``: this one).
    """
    from ropekit.eval.parallel import ONE_PROCESS

    processes = processes if processes is not None else ONE_PROCESS
    journal = journal if journal is not None else Journal(None, {})
    trace, seen = SearchTrace(), set()
    ops = settings.operators

    def propose(batch: list[Candidate], candidate: Candidate) -> None:
        if len(trace.scored) + len(batch) < settings.evaluations and candidate.key() not in seen:
            seen.add(candidate.key())
            batch.append(candidate)

    rng = np.random.default_rng([settings.seed, 0])
    members, batch = list(seeds.values()), []
    for candidate in members:
        propose(batch, candidate)
    for _ in range(RETRIES * settings.population):
        if len(batch) >= min(settings.population, settings.evaluations):
            break
        propose(batch, mutate(members[int(rng.integers(len(members)))], rng, factor, ops))
    _score(batch, 0, trace, objective, journal, progress, processes)
    generation = 1
    while len(trace.scored) < settings.evaluations and generation <= settings.evaluations * RETRIES:
        rng = np.random.default_rng([settings.seed, generation])
        parents, batch = trace.ranked(settings.parents), []
        for _ in range(settings.population):
            for _ in range(RETRIES):
                first = parents[int(rng.integers(len(parents)))]
                if len(parents) > 1 and rng.random() < ops.crossover:
                    second = parents[int(rng.integers(len(parents)))]
                    child = mutate(crossover(first, second, rng, factor), rng, factor, ops)
                else:
                    child = mutate(first, rng, factor, ops)
                if child.key() not in seen:
                    break
            propose(batch, child)
        _score(batch, generation, trace, objective, journal, progress, processes)
        generation += 1
    return trace


def _score(
    batch: list[Candidate],
    generation: int,
    trace: SearchTrace,
    objective: Callable[[Candidate], float],
    journal: Journal,
    progress: Callable[[int, float], None] | None,
    processes: Any,
) -> None:
    """Score one generation's ``batch`` (the journal's scores taken, the rest shared among ``processes``) and add it
    to ``trace`` in order. The main process journals each new score and reports it as soon as it has it: its own
    share as scored, the others' when they are gathered."""
    start = len(trace.scored)
    values: list[float | None] = [journal.recorded(start + i, c) for i, c in enumerate(batch)]
    done = [start, min((s for _, s, _ in trace.scored), default=math.inf)]  # (count, best) the main process knows

    def known(i: int, value: float, *, new: bool) -> None:
        if not processes.is_main:
            return
        if new:
            journal.append(start + i, batch[i], value, generation)
        done[0], done[1] = done[0] + 1, min(done[1], value)
        if progress is not None:
            progress(done[0], done[1])

    for i, value in enumerate(values):
        if value is not None:
            known(i, value, new=False)
    todo = [i for i, value in enumerate(values) if value is None]

    def run(units: list[int]) -> list[float]:
        scores = []
        for unit in units:
            scores.append(float(objective(batch[todo[unit]])))
            known(todo[unit], scores[-1], new=True)
        return scores

    if todo:
        costs = [1] * len(todo)  # every candidate is the same forward passes
        mine = set(processes.share(costs))
        for unit, value in enumerate(processes.map(costs, run)):
            values[todo[unit]] = value
            if unit not in mine:
                known(todo[unit], value, new=True)
    trace.scored.extend((c, float(v), generation) for c, v in zip(batch, values, strict=True))  # type: ignore[arg-type]
