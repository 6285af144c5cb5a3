"""The short-length term: the factors a default search writes cost at most the tolerance (2%) of 1x perplexity in
all against the model without scaling, the floor longrope's attention factor alone costs there (which every engine
derives from s, whatever the factors) included, measured by an independent path (per-window token losses)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.search.objective import SHORT_OVER, SHORT_WEIGHT, floor_exceeds, short_term


def test_short_term_is_zero_within_the_tolerance_and_linear_beyond():
    tolerance = 0.02
    assert short_term(math.log1p(tolerance), tolerance) == 0.0
    assert short_term(0.0, tolerance) == 0.0
    assert math.isclose(short_term(math.log1p(tolerance) + 0.003, tolerance), SHORT_OVER + SHORT_WEIGHT * 0.003)


def test_a_candidate_within_the_tolerance_ranks_before_any_over_it():
    """Retrieving (needle loss 0.5 nats) at 1x +2.1% loses to failing to retrieve (7 nats) at +1.9%."""
    tolerance = 0.02
    over = 0.5 + short_term(math.log1p(0.021), tolerance)
    within = 7.0 + short_term(math.log1p(0.019), tolerance)
    assert within < over
    assert floor_exceeds(math.log1p(0.03), tolerance) and not floor_exceeds(math.log1p(0.01), tolerance)


def _perplexity(model, ids, scaling) -> float:
    """Every window whole, one at a time, through the model's own token losses (not the search's batched path)."""
    model.set_scaling(scaling)
    return math.exp(float(np.mean([model.token_losses(row).mean().item() for row in ids])))


def _longrope(factors, factor: float):
    from ropekit.scaling.longrope import LongRopeScaling

    values = tuple(factors)
    return LongRopeScaling(short_factor=values, long_factor=values, original_max_position_embeddings=256, factor=factor)


def test_the_tolerance_is_the_total_1x_change_the_floor_included():
    """A candidate within the floor plus the tolerance but over the tolerance in all is penalised (the fixed cost plus
    the weight times its excess): every factor 1 at 8x costs exactly the floor (the attention factor alone, about 1.5% on the search's
    one window), over a tolerance of 1%."""
    from ropekit.search.request import SearchRequest
    from ropekit.search.run import objective, prepare, score, short_floor
    from ropekit.search.space import Candidate

    tolerance = 0.01
    prepared = prepare(SearchRequest(target_multiple=8.0, samples=1, heldout_samples=1, short_tolerance=tolerance))
    model, ids = prepared.model, prepared.short.ids
    source = _perplexity(model, ids, None)
    change = _perplexity(model, ids, _longrope([1.0] * 16, 8.0)) / source - 1
    assert change > tolerance  # over the tolerance in all; within the floor plus the tolerance (it is the floor)
    planned = short_floor(prepared)
    assert planned["short_floor_exceeds"] and math.isclose(planned["short_floor"], change, rel_tol=1e-3)
    candidate = Candidate(critical_pair=16, log_factors=(0.0,) * 16)
    needle = score(prepared, candidate, prepared.search)
    excess = math.log1p(change) - math.log1p(tolerance)
    assert math.isclose(objective(prepared, candidate) - needle, SHORT_OVER + SHORT_WEIGHT * excess, rel_tol=1e-3)


@pytest.fixture(scope="module")
def prepared_2x():
    from ropekit.search.request import SearchRequest
    from ropekit.search.run import prepare

    return prepare(SearchRequest(target_multiple=2.0, samples=1, heldout_samples=1))


def test_a_journal_counted_another_way_is_not_resumed(tmp_path, prepared_2x):
    """Scores journalled with the short-length term counted on top of the floor (a header without ``short_term``)
    are another search's: resuming would mix the two rules."""
    from ropekit.search.journal import Journal, JournalMismatch

    path = tmp_path / "journal.jsonl"
    header = prepared_2x.header()
    old = {**header, "settings": {k: v for k, v in header["settings"].items() if k != "short_term"}}
    Journal(path, old).begin({"evaluations": 1})
    with pytest.raises(JournalMismatch, match="short_term: absent"):
        Journal(path, header)


def test_default_search_writes_factors_within_the_tolerance_at_1x(prepared_2x):
    from ropekit.search.journal import Journal
    from ropekit.search.request import SHORT_TOLERANCE
    from ropekit.search.run import execute

    prepared = prepared_2x
    trace = execute(prepared, 7, Journal(None, prepared.header()))  # the seeds and one mutant
    best = trace.best[0]
    model, windows = prepared.model, prepared.short

    source = _perplexity(model, windows.ids, None)
    change = _perplexity(model, windows.ids, _longrope(best.factors, 2.0)) / source - 1
    assert math.isclose(math.log1p(change), prepared.parts[best.key()]["short_change"], rel_tol=1e-3, abs_tol=1e-6)
    assert change <= SHORT_TOLERANCE * (1 + 1e-6)
