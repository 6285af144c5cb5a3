"""The search space: per-pair ``longrope`` factors with a critical pair, the formula seeds and the operators.

A candidate is a critical pair ``c`` and one log-factor per rotary pair. The constraints (LongRoPE, arXiv 2402.13753,
section 3.2: factors >= 1 and non-decreasing from high to low frequency; LongRoPE2, arXiv 2502.20082, section 3.2:
pairs from the critical pair on are rescaled by at least s) are kept by :func:`repair`, which every operator applies
last, so every candidate the search scores is valid. Mutation and crossover act on log-factors: a step multiplies a
factor, the same relative change at every pair whatever its size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ropekit.config import RopeConfig

#: the formulas the first population starts from (each as ropekit's own scaling method computes it), and ``theory``:
#: NTK below the critical pair of Liu et al. (arXiv 2310.05209, eq. 8), s above it
SEED_NAMES = ("linear", "ntk", "yarn", "llama3", "theory")
#: a mutation's step is ``step · ln s`` times one of these, drawn per mutation: coarse moves early, fine ones near an
#: optimum, with no schedule to tune
SCALES = (1.0, 0.3, 0.1)
#: log-factors are compared and stored to this many decimals (duplicates are not scored twice)
DECIMALS = 9


@dataclass(frozen=True)
class Candidate:
    """One point of the search space.

    Attributes:
        critical_pair: c in [0, pairs]: pairs c, c+1, ... have factor >= s (``pairs``: no pair is held to s).
        log_factors: ln factor per rotary pair, each >= 0, non-decreasing.
    """

    critical_pair: int
    log_factors: tuple[float, ...]

    @property
    def factors(self) -> list[float]:
        """The ``long_factor`` list: exp of the log-factors, float64."""
        return [float(v) for v in np.exp(np.asarray(self.log_factors, dtype=np.float64))]

    def key(self) -> tuple:
        """What makes two candidates the same (rounded log-factors)."""
        return (self.critical_pair, *(round(v, DECIMALS) for v in self.log_factors))

    def to_dict(self) -> dict:
        return {"critical_pair": self.critical_pair, "log_factors": list(self.log_factors)}

    @classmethod
    def from_dict(cls, data: dict) -> Candidate:
        return cls(int(data["critical_pair"]), tuple(float(v) for v in data["log_factors"]))


def repair(log_factors: Sequence[float], critical_pair: int, factor: float) -> Candidate:
    """The nearest valid candidate: log-factors >= 0, >= ln s from ``critical_pair`` on, then non-decreasing (a
    running maximum, which only raises a factor, so the first two constraints still hold)."""
    values = np.maximum(np.asarray(log_factors, dtype=np.float64), 0.0)
    pairs = len(values)
    critical_pair = int(min(max(critical_pair, 0), pairs))
    values[critical_pair:] = np.maximum(values[critical_pair:], math.log(factor))
    values = np.maximum.accumulate(values)
    return Candidate(critical_pair, tuple(round(float(v), DECIMALS) for v in values))


def theory_critical_pair(rope: RopeConfig, original_length: int) -> int:
    """The critical pair of Liu et al. (arXiv 2310.05209, eq. 8): half the critical dimension, the first pair whose
    wavelength exceeds the training length (what ``ropekit inspect`` prints)."""
    from ropekit.theory.wavelengths import critical_dimension

    return critical_dimension(rope.dim, rope.base, original_length) // 2


def formula_factors(name: str, rope: RopeConfig, original_length: int, factor: float) -> np.ndarray:
    """Per-pair factors inv_freq(plain) / inv_freq(method) of the formula ``name`` (a rope_type, or ``theory``) at
    extension factor s = ``factor``, as ropekit's scaling methods compute them (float64)."""
    import dataclasses

    from ropekit.scaling import frequencies, get_scaling, inv_freq

    plain = inv_freq(rope.dim, rope.base)
    if name == "theory":
        ntk = formula_factors("ntk", rope, original_length, factor)
        critical = theory_critical_pair(rope, original_length)
        ntk[critical:] = np.maximum(ntk[critical:], factor)
        return ntk
    spec = get_scaling(name).config_class.from_options(factor=factor, original_length=original_length)
    scaled = frequencies(dataclasses.replace(rope, scaling=spec), seq_len=int(original_length * factor)).inv_freq
    return plain / scaled


def first_at_least(factors: np.ndarray, factor: float) -> int:
    """The first pair whose factor reaches s (to rounding), or the number of pairs if none does."""
    reached = np.nonzero(np.asarray(factors) >= factor * (1 - 1e-9))[0]
    return int(reached[0]) if len(reached) else len(factors)


def seed_candidates(rope: RopeConfig, original_length: int, factor: float) -> dict[str, Candidate]:
    """The formulas of :data:`SEED_NAMES` as candidates, each with its critical pair where its factors first reach
    s (``theory``: the theory's pair). A formula whose factors dip below 1 or fall over pairs is repaired."""
    seeds = {}
    for name in SEED_NAMES:
        values = formula_factors(name, rope, original_length, factor)
        critical = theory_critical_pair(rope, original_length) if name == "theory" else first_at_least(values, factor)
        seeds[name] = repair(np.log(np.maximum(values, 1.0)), critical, factor)
    return seeds


@dataclass(frozen=True)
class Operators:
    """How children are made (defaults chosen in docs/search.md).

    Attributes:
        rate: the chance each pair's log-factor takes a step.
        step: the standard deviation of a step, as a fraction of ln s.
        shift_rate: the chance the critical pair moves by one.
        crossover: the chance a child is a crossover of two parents (then mutated) instead of a mutant of one.
    """

    rate: float = 0.3
    step: float = 0.25
    shift_rate: float = 0.3
    crossover: float = 0.3


def mutate(parent: Candidate, rng: np.random.Generator, factor: float, ops: Operators) -> Candidate:
    """Gaussian steps in log-factor space on a random subset of pairs (at least one), of a size drawn from
    :data:`SCALES`, and, sometimes, the critical pair moved by one; then :func:`repair`."""
    values = np.asarray(parent.log_factors, dtype=np.float64).copy()
    chosen = rng.random(len(values)) < ops.rate
    chosen[rng.integers(len(values))] = True
    scale = ops.step * max(math.log(factor), 1e-3) * float(rng.choice(SCALES))
    values[chosen] += rng.normal(0.0, scale, int(chosen.sum()))
    critical = parent.critical_pair
    if rng.random() < ops.shift_rate:
        critical += int(rng.choice((-1, 1)))
    return repair(values, critical, factor)


def crossover(first: Candidate, second: Candidate, rng: np.random.Generator, factor: float) -> Candidate:
    """Each pair's log-factor from either parent (uniform crossover, as LongRoPE's search takes each dimension from
    one parent), the critical pair from one of them; then :func:`repair`."""
    mask = rng.random(len(first.log_factors)) < 0.5
    values = np.where(mask, first.log_factors, second.log_factors)
    critical = first.critical_pair if rng.random() < 0.5 else second.critical_pair
    return repair(values, critical, factor)
