"""The search's memory plan, made before any forward pass: one sample that does not fit refuses the target length,
a batch size that does not fit is refused naming it, and without one the largest batch that fits is taken.

Oracle: the evaluation's own estimate (:func:`ropekit.eval.sweep.peak_memory_estimate`, linear in the batch) against
a free memory set by the test, solved by hand for the batch that fits."""

from __future__ import annotations

import pytest

from helpers.cli import assert_error, run
from ropekit.errors import InvalidArgument


@pytest.fixture
def free_memory(monkeypatch):
    """Set what ``available_memory`` says is free (bytes)."""
    import ropekit._free_memory as free

    def set_free(count: int) -> None:
        monkeypatch.setattr(free, "available_memory", lambda device=None: count)

    return set_free


@pytest.fixture(scope="module")
def tiny():
    from ropekit.eval.loader import load_eval_model

    return load_eval_model("tiny")


def test_the_largest_batch_that_fits_is_taken(tiny, free_memory):
    from ropekit.eval.sweep import peak_memory_estimate
    from ropekit.search.memory import MEMORY_SHARE, rows_per_forward
    from ropekit.search.request import SearchRequest

    target = 50_000
    one, two = peak_memory_estimate(tiny, target, 1), peak_memory_estimate(tiny, target, 2)
    request = SearchRequest(target_length=target, samples=16, heldout_samples=32)
    free_memory(int((one + 4.5 * (two - one)) / MEMORY_SHARE))  # room for 5 rows and a half
    assert rows_per_forward(tiny, request, target) == 5
    free_memory(10 * 2**40)
    assert rows_per_forward(tiny, request, target) is None  # all at once
    free_memory(int((one + 4.5 * (two - one)) / MEMORY_SHARE))
    with pytest.raises(InvalidArgument, match="largest that fits is 5") as caught:
        rows_per_forward(tiny, SearchRequest(target_length=target, batch_size=8), target)
    assert caught.value.argument == "batch_size"


def test_a_target_one_sample_of_which_does_not_fit_is_refused_before_any_forward(free_memory, monkeypatch, tmp_path):
    import ropekit.search.run as search_run

    def no_forward(*args, **kwargs):
        raise AssertionError("a forward pass ran")

    monkeypatch.setattr(search_run, "needle_loss", no_forward)
    free_memory(2**20)
    result = run("search", "--target-length", "100k", "--out", tmp_path / "o")
    assert_error(result, "--target-length", "GiB", "free")
    assert not (tmp_path / "o").exists()
