"""The search space: per-pair ``longrope`` factors with a critical pair, the formula seeds and the operators.

A candidate is a critical pair ``c`` and one log-factor per rotary pair. The constraints (LongRoPE, arXiv 2402.13753,
section 3.2: factors >= 1 and non-decreasing from high to low frequency; LongRoPE2, arXiv 2502.20082, section 3.2:
pairs from the critical pair on are rescaled by at least s) are kept by :func:`repair`, which every operator applies
last, so every candidate the search scores is valid. Mutation and crossover act on log-factors: a step multiplies a
factor, the same relative change at every pair whatever its size.

Two forms (``--space``): ``free``, every pair's factor searched within the constraints; ``longrope2``, LongRoPE2's own
(arXiv 2502.20082, section 3.2): the pairs from the critical pair on searched, the ones below tied to the NTK curve
of a searched base b' (pair i's factor (b'/b)^(2i/d), i.e. ln factor = g·i/pairs with g = ln(b'/b) >= 0). A
candidate of the second form carries g; :func:`tie` is its repair, and the operators keep the form of their parents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ropekit.config import RopeConfig

#: the formulas the first population starts from (each as ropekit's own scaling method computes it), and ``theory``:
#: NTK below the critical pair of Liu et al. (arXiv 2310.05209, eq. 8), s above it
#: and ``tail``: plain RoPE below the first pair whose wavelength exceeds the target length, s from it on (only the
#: pairs that complete no period even at T are interpolated: the least change at L0)
SEED_NAMES = ("linear", "ntk", "yarn", "llama3", "theory", "tail")
#: the search's forms (``--space``)
SPACES = ("free", "longrope2")
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
        log_base_ratio: the ``longrope2`` form's g = ln(b'/b): pair i < c has ln factor g·i/pairs exactly;
            ``None`` in the free form.
    """

    critical_pair: int
    log_factors: tuple[float, ...]
    log_base_ratio: float | None = None

    @property
    def factors(self) -> list[float]:
        """The ``long_factor`` list: exp of the log-factors, float64."""
        return [float(v) for v in np.exp(np.asarray(self.log_factors, dtype=np.float64))]

    def key(self) -> tuple:
        """What makes two candidates the same (rounded log-factors)."""
        tied = () if self.log_base_ratio is None else (round(self.log_base_ratio, DECIMALS),)
        return (self.critical_pair, *(round(v, DECIMALS) for v in self.log_factors), *tied)

    def to_dict(self) -> dict:
        data = {"critical_pair": self.critical_pair, "log_factors": list(self.log_factors)}
        return data if self.log_base_ratio is None else {**data, "log_base_ratio": self.log_base_ratio}

    @classmethod
    def from_dict(cls, data: dict) -> Candidate:
        ratio = data.get("log_base_ratio")
        return cls(
            int(data["critical_pair"]),
            tuple(float(v) for v in data["log_factors"]),
            None if ratio is None else float(ratio),
        )


def repair(log_factors: Sequence[float], critical_pair: int, factor: float) -> Candidate:
    """The nearest valid candidate: log-factors >= 0, >= ln s from ``critical_pair`` on, then non-decreasing (a
    running maximum, which only raises a factor, so the first two constraints still hold)."""
    values = np.maximum(np.asarray(log_factors, dtype=np.float64), 0.0)
    pairs = len(values)
    critical_pair = int(min(max(critical_pair, 0), pairs))
    values[critical_pair:] = np.maximum(values[critical_pair:], math.log(factor))
    values = np.maximum.accumulate(values)
    return Candidate(critical_pair, tuple(round(float(v), DECIMALS) for v in values))


def tie(log_factors: Sequence[float], critical_pair: int, factor: float, log_base_ratio: float) -> Candidate:
    """The nearest ``longrope2`` candidate: g = ``log_base_ratio`` (at least 0), pairs below the critical pair on
    the NTK curve ln factor_i = g·i/pairs, the rest :func:`repair`'s (the curve is non-decreasing and >= 0, so the
    repair leaves it as it is and only raises the searched pairs)."""
    values = np.asarray(log_factors, dtype=np.float64).copy()
    pairs = len(values)
    critical_pair = int(min(max(critical_pair, 0), pairs))
    ratio = round(max(float(log_base_ratio), 0.0), DECIMALS)
    values[:critical_pair] = ratio * np.arange(critical_pair) / pairs
    free = repair(values, critical_pair, factor)
    return Candidate(free.critical_pair, free.log_factors, ratio)


def fitted_ratio(log_factors: Sequence[float], critical_pair: int) -> float:
    """The g of the NTK curve nearest (least squares, ln factor_i = g·i/pairs) to the pairs below the critical pair;
    where fewer than two pairs lie there, g of NTK at the largest of those factors (0 if none)."""
    values = np.asarray(log_factors, dtype=np.float64)
    pairs, index = len(values), np.arange(min(critical_pair, len(values)), dtype=np.float64)
    if len(index) < 2:
        return 0.0
    return max(0.0, float(pairs * (index @ values[: len(index)]) / (index @ index)))


def theory_critical_pair(rope: RopeConfig, original_length: int) -> int:
    """The critical pair of Liu et al. (arXiv 2310.05209, eq. 8): half the critical dimension, the first pair whose
    wavelength exceeds the training length (what ``ropekit inspect`` prints)."""
    from ropekit.theory.wavelengths import critical_dimension

    return critical_dimension(rope.dim, rope.base, original_length) // 2


def formula_factors(name: str, rope: RopeConfig, original_length: int, factor: float) -> np.ndarray:
    """Per-pair factors inv_freq(plain) / inv_freq(method) of the formula ``name`` (a rope_type, or ``theory``) at
    extension factor s = ``factor``, as ropekit's scaling methods compute them (float64); ``tail``: 1 below the first
    pair whose wavelength exceeds ``original_length · factor``, s from it on."""
    import dataclasses

    from ropekit.scaling import frequencies, get_scaling, inv_freq

    plain = inv_freq(rope.dim, rope.base)
    if name == "tail":
        beyond = np.nonzero(2 * np.pi / plain > original_length * factor)[0]
        values = np.ones(len(plain))
        values[beyond[0] if len(beyond) else len(plain) :] = factor
        return values
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


def seed_candidates(rope: RopeConfig, original_length: int, factor: float, space: str = "free") -> dict[str, Candidate]:
    """The formulas of :data:`SEED_NAMES` as candidates, each with its critical pair where its factors first reach
    s (``theory``: the theory's pair). A formula whose factors dip below 1 or fall over pairs is repaired; in the
    ``longrope2`` form its pairs below the critical pair are replaced by the nearest NTK curve (:func:`fitted_ratio`).
    """
    from ropekit._validate import require_choice

    require_choice("space", space, SPACES)
    seeds = {}
    for name in SEED_NAMES:
        values = formula_factors(name, rope, original_length, factor)
        critical = theory_critical_pair(rope, original_length) if name == "theory" else first_at_least(values, factor)
        logs = np.log(np.maximum(values, 1.0))
        free = repair(logs, critical, factor)
        seeds[name] = free if space == "free" else tie(logs, critical, factor, fitted_ratio(logs, critical))
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
    """Gaussian steps in log-factor space on a random subset of the searched values (at least one), of a size drawn
    from :data:`SCALES`, and, sometimes, the critical pair moved by one; then :func:`repair` (:func:`tie` in the
    ``longrope2`` form, whose searched values are the pairs from the critical pair on and g; g's step is scaled so
    that it moves the largest tied factor as much as a step moves a searched one)."""
    values = np.asarray(parent.log_factors, dtype=np.float64).copy()
    tied = parent.log_base_ratio is not None
    first = parent.critical_pair if tied else 0
    genes = np.arange(first, len(values) + int(tied))  # with g last in the longrope2 form
    mask = rng.random(len(genes)) < ops.rate
    mask[rng.integers(len(genes))] = True
    scale = ops.step * max(math.log(factor), 1e-3) * float(rng.choice(SCALES))
    steps = rng.normal(0.0, scale, int(mask.sum()))
    ratio = parent.log_base_ratio
    for gene, step in zip(genes[mask].tolist(), steps.tolist(), strict=True):
        if gene == len(values):
            ratio += step * len(values) / max(parent.critical_pair - 1, 1)
        else:
            values[gene] += step
    critical = parent.critical_pair
    if rng.random() < ops.shift_rate:
        critical += int(rng.choice((-1, 1)))
    return repair(values, critical, factor) if not tied else tie(values, critical, factor, ratio)


def crossover(first: Candidate, second: Candidate, rng: np.random.Generator, factor: float) -> Candidate:
    """Each pair's log-factor from either parent (uniform crossover, as LongRoPE's search takes each dimension from
    one parent), the critical pair (and, in the ``longrope2`` form, g) from one of them; then :func:`repair`
    (:func:`tie`)."""
    mask = rng.random(len(first.log_factors)) < 0.5
    values = np.where(mask, first.log_factors, second.log_factors)
    chosen = first if rng.random() < 0.5 else second
    if first.log_base_ratio is None or second.log_base_ratio is None:
        return repair(values, chosen.critical_pair, factor)
    ratio = first.log_base_ratio if rng.random() < 0.5 else second.log_base_ratio
    return tie(values, chosen.critical_pair, factor, ratio)


def ntk_base(candidate: Candidate, base: float) -> float | None:
    """The NTK base b' = b·e^g of a ``longrope2`` candidate's tied pairs (``None`` in the free form)."""
    return None if candidate.log_base_ratio is None else float(base * math.exp(candidate.log_base_ratio))
