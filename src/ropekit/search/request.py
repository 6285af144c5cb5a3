"""What a search is asked to do, checked before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ropekit._validate import require_choice, require_float, require_int
from ropekit.errors import InvalidArgument
from ropekit.search.space import SPACES

#: the defaults (why: docs/search.md)
SAMPLES, HELDOUT_SAMPLES, POPULATION, PARENTS, EVALUATIONS = 16, 32, 16, 6, 96
#: the total 1x perplexity change (the attention factor's floor included) a candidate may cost before the
#: objective's short-length term counts
SHORT_TOLERANCE = 0.02


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """One search.

    Attributes:
        model: ``tiny``, a tiny checkpoint, a transformers folder or a GGUF file.
        target_length: T in tokens (above the model's original length L0; s = T / L0); or
        target_multiple: T as a multiple of L0 (> 1), resolved when the model is known.
        evaluations: the budget as a count of scored candidates; or
        budget_seconds: the budget as time, turned into a count when the search starts (from one timed candidate;
            the count is kept in the journal so a resumed search ends where the first would have).
        samples: needle samples the search scores each candidate on.
        heldout_samples: the disjoint samples of the final score.
        seed: seeds the samples and the search.
        text: the filler text (``None``: the shipped held-out text).
        batch_size: rows per forward (``None``: all samples in one).
        population, parents: the evolution's sizes (:class:`~ropekit.search.evolve.SearchSettings`).
        switch: write ``short_factor`` as ones (plain RoPE up to L0) instead of equal to ``long_factor``.
        dtype: the evaluation dtype (:data:`ropekit.eval.model_support.DTYPES`).
        device_map: transformers' ``device_map`` (e.g. ``"auto"``: one model over several devices), for a
            transformers model in one process; ``None``: where the loader puts it.
        space: the candidates' form (:data:`ropekit.search.space.SPACES`): ``free`` or ``longrope2``.
        short_tolerance: the total 1x perplexity change against the model without scaling (0.02: 2%), the floor
            longrope's attention factor alone costs included, a candidate may cost before the short-length term of
            the objective counts (:mod:`ropekit.search.objective`).
    """

    model: str = "tiny"
    target_length: int | None = None
    target_multiple: float | None = None
    evaluations: int | None = None
    budget_seconds: float | None = None
    samples: int = SAMPLES
    heldout_samples: int = HELDOUT_SAMPLES
    seed: int = 0
    text: str | None = None
    batch_size: int | None = None
    population: int = POPULATION
    parents: int = PARENTS
    switch: bool = False
    dtype: str = "auto"
    device_map: str | None = None
    space: str = "free"
    short_tolerance: float = SHORT_TOLERANCE

    def __post_init__(self) -> None:
        if (self.target_length is None) == (self.target_multiple is None):
            raise InvalidArgument("target_length", self.target_length, message="give target_length or target_multiple")
        if self.target_length is not None:
            require_int("target_length", self.target_length, minimum=2)
        else:
            multiple = require_float("target_multiple", self.target_multiple)
            if not multiple > 1:
                message = f"target_length must be above the model's original length, got {multiple:g}x"
                raise InvalidArgument("target_length", multiple, message=message)

        if self.evaluations is not None and self.budget_seconds is not None:
            message = "give a budget in time or in evaluations, not both"
            raise InvalidArgument("budget_seconds", self.budget_seconds, message=message)
        if self.evaluations is not None:
            require_int("evaluations", self.evaluations, minimum=1)
        if self.budget_seconds is not None:
            require_float("budget_seconds", self.budget_seconds, above=0.0)
        require_int("samples", self.samples, minimum=1)
        require_int("heldout_samples", self.heldout_samples, minimum=1)
        require_int("seed", self.seed, minimum=0)
        require_int("population", self.population, minimum=2)
        require_int("parents", self.parents, minimum=1)
        if self.batch_size is not None:
            require_int("batch_size", self.batch_size, minimum=1)
        if self.device_map is not None and (not isinstance(self.device_map, str) or not self.device_map.strip()):
            raise InvalidArgument("device_map", self.device_map, "must name a device map such as 'auto'")
        require_choice("space", self.space, SPACES)
        require_float("short_tolerance", self.short_tolerance, at_least=0.0)

    def target_for(self, original_length: int) -> int:
        """T in tokens for a model trained at ``original_length``."""
        if self.target_length is not None:
            return self.target_length
        return round(float(self.target_multiple) * original_length)

    def target_argument(self) -> tuple[str, Any]:
        """``(name, value)`` of the argument that gave the target (``target_length`` or ``target_multiple``): what a
        refusal about the target names."""
        if self.target_length is not None:
            return "target_length", self.target_length
        return "target_multiple", self.target_multiple
