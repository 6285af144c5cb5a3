"""Perplexity against length: oracles are closed forms (uniform → V, perfect → 1), a hand computation, and
token counts worked out by hand for each windowing mode.

Losses come from a float32 log-softmax (as every LM evaluation does; float64 logits would double the memory of
a long window), so closed forms hold to float32 precision: RTOL.
"""

from __future__ import annotations

import math

import pytest
import torch

from ropekit.eval.perplexity import full_logits_losses, perplexity_at

V = 7  # vocabulary of the synthetic "models" below
RTOL = 1e-6


def successor_data(n: int) -> torch.Tensor:
    """Token i is i mod V, so the true next token of x is always (x + 1) mod V."""
    return torch.arange(n) % V


def uniform(ids: torch.Tensor) -> torch.Tensor:
    return torch.zeros(*ids.shape, V)  # (batch, seq, V)


def perfect(ids: torch.Tensor) -> torch.Tensor:
    """All mass on the true next token of successor data."""
    return 60.0 * torch.nn.functional.one_hot((ids + 1) % V, V).float()  # (batch, seq, V)


def split_model(train_length: int):
    """Uniform at window positions < train_length, perfect beyond: inside ppl is V, beyond is 1."""

    def logits(ids: torch.Tensor) -> torch.Tensor:
        out = perfect(ids)
        out[:, :train_length] = 0.0
        return out

    return logits


def test_uniform_logits_give_vocabulary_size() -> None:
    point = perplexity_at(uniform, successor_data(200), 32, 16)
    assert point.perplexity == pytest.approx(V, rel=RTOL)
    assert point.inside == pytest.approx(V, rel=RTOL)
    assert point.beyond == pytest.approx(V, rel=RTOL)


def test_all_mass_on_the_true_token_gives_one() -> None:
    point = perplexity_at(perfect, successor_data(200), 32, 16, mode="sliding", stride=8)
    assert point.perplexity == pytest.approx(1.0, abs=RTOL)
    assert point.inside == pytest.approx(1.0, abs=RTOL)
    assert point.beyond == pytest.approx(1.0, abs=RTOL)


def test_hand_computed_losses_on_a_short_sequence() -> None:
    """Logits depend only on the position: row p of W. Data [0, 2, 1, 1], one window of 3, train_length 2."""
    table = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])

    def logits(ids: torch.Tensor) -> torch.Tensor:
        return table[: ids.shape[1]].expand(ids.shape[0], -1, -1)

    data = torch.tensor([0, 2, 1, 1])
    e = math.e
    nll = [  # -log softmax(W[p])[target]: targets 2, 1, 1
        math.log(e + 2),
        math.log(e**2 + 2) - 2,
        math.log(e**3 + 2),
    ]
    assert full_logits_losses(logits, data).tolist() == pytest.approx(nll, rel=1e-6)
    point = perplexity_at(logits, data, 3, 2)
    assert point.tokens == 3
    assert (point.inside_tokens, point.beyond_tokens) == (2, 1)
    assert point.inside == pytest.approx(math.exp((nll[0] + nll[1]) / 2), rel=1e-6)
    assert point.beyond == pytest.approx(math.exp(nll[2]), rel=1e-6)
    assert point.perplexity == pytest.approx(math.exp(sum(nll) / 3), rel=1e-6)


@pytest.mark.parametrize(
    ("mode", "stride", "max_tokens", "inside", "beyond"),
    [
        # 101 tokens, windows of 20 at 0, 20, 40, 60, 80: each scores 8 inside (positions 0-7) and 12 beyond.
        ("nonoverlap", 256, 10_000, 40, 60),
        # Two windows are started before 30 scored tokens are reached.
        ("nonoverlap", 256, 30, 16, 24),
        # Windows at 0, 5, ..., 80 (17): the first scores all 20 tokens, the others their last 5 (positions
        # 15-19, beyond). Every token 1..100 is scored exactly once.
        ("sliding", 5, 10_000, 8, 92),
        # Windows at 0, 15, ..., 75 (6): the others score positions 5-19, of which 5, 6, 7 are inside.
        ("sliding", 15, 10_000, 8 + 5 * 3, 12 + 5 * 12),
        # A stride beyond the window is the non-overlapping mode (no token between windows left unscored).
        ("sliding", 50, 10_000, 40, 60),
    ],
)
def test_inside_and_beyond_token_counts(mode: str, stride: int, max_tokens: int, inside: int, beyond: int) -> None:
    train_length = 8
    point = perplexity_at(
        split_model(train_length),
        successor_data(101),
        20,
        train_length,
        mode=mode,
        stride=stride,
        max_tokens=max_tokens,
    )
    assert (point.inside_tokens, point.beyond_tokens) == (inside, beyond)
    assert point.tokens == inside + beyond
    # The model is uniform inside and perfect beyond, so the counts also fix the perplexities.
    assert point.inside == pytest.approx(V, rel=RTOL)
    assert point.beyond == pytest.approx(1.0, abs=RTOL)
    assert point.perplexity == pytest.approx(V ** (inside / (inside + beyond)), rel=RTOL)


def test_no_beyond_tokens_when_the_window_fits_the_training_length() -> None:
    point = perplexity_at(uniform, successor_data(100), 16, 16)
    assert point.beyond is None
    assert point.beyond_tokens == 0
    assert point.inside_tokens == point.tokens == 16 * 6


def test_each_window_is_one_forward_pass_of_length_tokens() -> None:
    calls = []

    def recording(ids: torch.Tensor) -> torch.Tensor:
        calls.append(ids.clone())
        return uniform(ids)

    data = successor_data(61)
    perplexity_at(recording, data, 20, 10)
    assert [c.shape for c in calls] == [torch.Size([1, 20])] * 3
    for k, c in enumerate(calls):
        assert torch.equal(c[0], data[20 * k : 20 * k + 20])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 100}, "needs at least 101"),
        ({"mode": "strided"}, "mode"),
        ({"mode": "sliding", "stride": 0}, "stride"),
        ({"length": 1}, "length"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs: dict, match: str) -> None:
    args = {"length": 20, "mode": "nonoverlap", "stride": 4, "max_tokens": 100} | kwargs
    with pytest.raises(ValueError, match=match):
        perplexity_at(uniform, successor_data(100), args.pop("length"), 8, **args)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_losses_are_refused_not_reported(bad: float) -> None:
    """a model that overflows must not yield a NaN or inf perplexity silently."""

    def overflowing(ids: torch.Tensor) -> torch.Tensor:
        out = uniform(ids)
        out[:, 5:, 0] = bad  # one poisoned logit per position from 5 on
        return out

    with pytest.raises(RuntimeError, match=r"non-finite losses .* at length 8 .* first at position 6"):
        perplexity_at(overflowing, successor_data(40), 8, 4)
