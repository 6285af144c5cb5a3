"""The evolutionary loop on synthetic objectives: a planted optimum is found, a seed fixes the result, and a stopped
search resumes from its journal to the same result."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.config import RopeConfig
from ropekit.search.evolve import SearchSettings, run_search
from ropekit.search.journal import Journal, JournalMismatch
from ropekit.search.space import Candidate, repair, seed_candidates

ROPE, ORIGINAL, FACTOR = RopeConfig(32, base=10000.0), 256, 4.0
SEEDS = seed_candidates(ROPE, ORIGINAL, FACTOR)
#: a valid optimum that no seed is: geometric growth to pair 5, then 1.6 s and above
PLANTED = repair([0.08 * i for i in range(6)] + [math.log(1.6 * FACTOR) + 0.05 * i for i in range(10)], 6, FACTOR)


def planted(candidate: Candidate) -> float:
    """Squared distance in log-factor space to :data:`PLANTED`, plus a step per pair the critical pair is off."""
    gap = np.asarray(candidate.log_factors) - np.asarray(PLANTED.log_factors)
    return float(np.sum(gap**2) + 0.05 * abs(candidate.critical_pair - PLANTED.critical_pair))


def test_finds_a_planted_optimum():
    settings = SearchSettings(evaluations=800, population=24, parents=3, seed=0)
    trace = run_search(planted, SEEDS, settings, factor=FACTOR)
    best, score = trace.best
    start = min(planted(seed) for seed in SEEDS.values())  # 5.6: the nearest seed is far off
    assert score < start / 200
    np.testing.assert_allclose(best.factors, PLANTED.factors, rtol=0.08)
    assert best.critical_pair == PLANTED.critical_pair
    assert len(trace.scored) == 800 and len({c.key() for c, _, _ in trace.scored}) == 800


def test_every_candidate_is_valid():
    trace = run_search(planted, SEEDS, SearchSettings(evaluations=120, seed=1), factor=FACTOR)
    for candidate, _, _ in trace.scored:
        logs = np.asarray(candidate.log_factors)
        assert (logs >= 0).all() and (np.diff(logs) >= 0).all()
        assert (logs[candidate.critical_pair :] >= math.log(FACTOR) - 1e-6).all()


def test_same_seed_same_result_other_seed_other_path():
    def trace(seed):
        return run_search(planted, SEEDS, SearchSettings(evaluations=80, seed=seed), factor=FACTOR).to_list()

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)


#: a journal header (:mod:`ropekit.search.identity`) with one setting
HEADER = {"settings": {"seed": 2}}


def test_stopped_search_resumes_to_the_same_result(tmp_path):
    settings = SearchSettings(evaluations=90, population=12, seed=2)
    whole = run_search(planted, SEEDS, settings, factor=FACTOR).to_list()
    calls = []

    def stopping(candidate):
        calls.append(candidate)
        if len(calls) == 37:
            raise KeyboardInterrupt
        return planted(candidate)

    path = tmp_path / "journal.jsonl"
    first = Journal(path, HEADER)
    first.begin({"evaluations": 90})
    with pytest.raises(KeyboardInterrupt):
        run_search(stopping, SEEDS, settings, factor=FACTOR, journal=first)
    fresh = []
    journal = Journal(path, HEADER)
    journal.begin({"evaluations": 90})
    assert len(journal.entries) == 36
    resumed = run_search(lambda c: fresh.append(c) or planted(c), SEEDS, settings, factor=FACTOR, journal=journal)
    assert resumed.to_list() == whole
    assert len(fresh) == 90 - 36  # only the candidates the stopped search had not scored


def test_journal_of_other_settings_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    Journal(path, HEADER).begin({"evaluations": 5})
    assert Journal(path, HEADER).recorded_plan == {"evaluations": 5}  # the plan is not compared
    with pytest.raises(JournalMismatch, match="seed: 2 → 3"):
        Journal(path, {"settings": {"seed": 3}})
    replaced = Journal(path, {"settings": {"seed": 3}}, replace=True)
    assert replaced.replaced and not replaced.entries and replaced.recorded_plan is None
