"""The short-length term: the factors a default search writes cost at most the tolerance (2%) of 1x perplexity on
top of what longrope's attention factor alone costs there (which every engine derives from s, whatever the factors),
measured by an independent path (transformers-style per-window token losses)."""

from __future__ import annotations

import math

import numpy as np

from ropekit.search.objective import SHORT_WEIGHT, short_term


def test_short_term_is_zero_within_the_tolerance_and_linear_beyond():
    floor, tolerance = 0.01, 0.02
    assert short_term(floor + math.log1p(tolerance), floor, tolerance) == 0.0
    assert short_term(0.0, floor, tolerance) == 0.0
    assert math.isclose(short_term(floor + math.log1p(tolerance) + 0.003, floor, tolerance), SHORT_WEIGHT * 0.003)


def test_default_search_writes_factors_within_the_tolerance_at_1x():
    from ropekit.scaling.longrope import LongRopeScaling
    from ropekit.search.journal import Journal
    from ropekit.search.request import SHORT_TOLERANCE, SearchRequest
    from ropekit.search.run import execute, prepare

    prepared = prepare(SearchRequest(target_multiple=2.0, samples=1, heldout_samples=1))
    trace = execute(prepared, 7, Journal(None, prepared.header()))  # the seeds and one mutant
    best = trace.best[0]
    model, windows = prepared.model, prepared.short

    def perplexity(scaling) -> float:  # every window whole, one at a time, through the model's own token losses
        model.set_scaling(scaling)
        return math.exp(float(np.mean([model.token_losses(row).mean().item() for row in windows.ids])))

    source = perplexity(None)
    written = LongRopeScaling(
        short_factor=tuple(best.factors),
        long_factor=tuple(best.factors),
        original_max_position_embeddings=256,
        factor=2.0,
    )
    ones = LongRopeScaling(
        short_factor=(1.0,) * 16, long_factor=(1.0,) * 16, original_max_position_embeddings=256, factor=2.0
    )
    change, floor = perplexity(written) / source - 1, perplexity(ones) / source - 1
    assert math.isclose(math.log1p(change), prepared.parts[best.key()]["short_change"], rel_tol=1e-3, abs_tol=1e-6)
    assert (1 + change) <= (1 + floor) * (1 + SHORT_TOLERANCE) * (1 + 1e-6)
