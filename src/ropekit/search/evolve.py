"""The evolutionary search over :mod:`ropekit.search.space`, for any objective (factors → score, lower is better).

Generation 0 is the formula seeds, then mutants of them until the population is full. Each later generation keeps
the best ``parents`` candidates scored so far (elitism over the whole history, as LongRoPE's search keeps its top
k) and makes ``population`` children: a crossover of two parents then a mutation, or a mutation of one. A child
already scored is not scored again. Randomness comes from ``numpy.random.default_rng([seed, generation])``, so the
search is a function of its settings and the scores; :class:`~ropekit.search.journal.Journal` makes it resumable.
"""

from __future__ import annotations

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
) -> SearchTrace:
    """Search until ``settings.evaluations`` candidates are scored; return the trace.

    Args:
        objective: candidate → score (lower is better); called once per new candidate.
        seeds: generation 0's first members, in order (the formulas).
        factor: s, which the candidates are held to from their critical pair on.
        journal: scores already made (a resumed search) and where new ones are appended.
        progress: called after each evaluation with (evaluations done, best score so far).
    """
    journal = journal if journal is not None else Journal(None, {})
    trace, seen = SearchTrace(), set()
    ops = settings.operators

    def score(candidate: Candidate, generation: int) -> bool:
        if len(trace.scored) >= settings.evaluations or candidate.key() in seen:
            return False
        seen.add(candidate.key())
        index = len(trace.scored)
        value = journal.recorded(index, candidate)
        if value is None:
            value = float(objective(candidate))
            journal.append(index, candidate, value, generation)
        trace.scored.append((candidate, value, generation))
        if progress is not None:
            progress(len(trace.scored), trace.best[1])
        return True

    rng = np.random.default_rng([settings.seed, 0])
    members = list(seeds.values())
    for candidate in members:
        score(candidate, 0)
    for _ in range(RETRIES * settings.population):
        if len(trace.scored) >= min(settings.population, settings.evaluations):
            break
        score(mutate(members[int(rng.integers(len(members)))], rng, factor, ops), 0)
    generation = 1
    while len(trace.scored) < settings.evaluations and generation <= settings.evaluations * RETRIES:
        rng = np.random.default_rng([settings.seed, generation])
        parents = trace.ranked(settings.parents)
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
            score(child, generation)
        generation += 1
    return trace
