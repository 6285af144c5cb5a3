"""The needle-driven objective against a hand computation: the loss on the answer tokens only."""

from __future__ import annotations

import math

import numpy as np
import torch

from ropekit.search.objective import (
    NeedleSamples,
    answer_losses,
    disjoint,
    needle_loss,
    needle_samples,
    sample_scores,
)


class FixedLogits:
    """A stand-in model whose final hidden states are the logits given for each input row (the output head is the
    identity)."""

    def __init__(self, ids: torch.Tensor, logits: torch.Tensor) -> None:
        self.rows = {tuple(row[:-1].tolist()): table for row, table in zip(ids, logits, strict=True)}

    def set_scaling(self, scaling) -> None:
        pass

    def hidden_states(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.rows[tuple(row.tolist())][: ids.shape[1]] for row in ids])  # (batch, seq, vocab)

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden


def test_loss_is_on_answer_tokens_only_by_hand():
    # two rows of 5 tokens over a vocabulary of 3; row 0's answer is its last 2 tokens, row 1's its last 1
    ids = torch.tensor([[0, 1, 2, 1, 0], [2, 2, 0, 1, 2]])
    logits = torch.tensor(
        [
            [[9.0, 9, 9], [9, 9, 9], [9, 9, 9], [1.0, 2.0, 0.5], [0.0, 3.0, 1.0]],
            [[9.0, 9, 9], [9, 9, 9], [9, 9, 9], [9, 9, 9], [2.0, 0.0, -1.0]],
        ]
    )  # position t predicts token t + 1; only positions 2, 3 (row 0) and 3 (row 1) may count
    samples = NeedleSamples(ids, (2, 1))

    def nll(row: list[float], target: int) -> float:
        return -(row[target] - math.log(sum(math.exp(v) for v in row)))

    # row 0: positions 2 and 3 predict tokens 3 (=1) and 4 (=0); row 1: position 3 predicts token 4 (=2)
    by_hand = [nll([9, 9, 9], 1), nll([1.0, 2.0, 0.5], 0), nll([9, 9, 9], 2)]
    model = FixedLogits(ids, logits)
    got = answer_losses(model, samples)
    np.testing.assert_allclose(got.numpy(), by_hand, rtol=1e-6)
    # the objective: each sample's mean answer loss, then the mean over samples (row 0's two tokens count once)
    by_sample = [(by_hand[0] + by_hand[1]) / 2, by_hand[2]]
    assert math.isclose(needle_loss(model, samples, None), sum(by_sample) / 2, rel_tol=1e-6)
    losses, hits = sample_scores(model, samples)
    np.testing.assert_allclose(losses, by_sample, rtol=1e-6)
    # greedy: row 0 predicts argmax 0 (of 9, 9, 9: the first) then 0 (argmax of [1, 2, 0.5] is 1): not all right;
    # row 1 predicts 0 where 2 is the answer
    assert hits.tolist() == [False, False]
    np.testing.assert_allclose(answer_losses(model, samples, batch_size=1).numpy(), by_hand, rtol=1e-6)


def test_tiny_model_loss_equals_full_logits():
    from ropekit.eval.models import TinyEvalModel
    from ropekit.eval.text import shipped_text, tokenize
    from ropekit.scaling import LinearScaling

    model = TinyEvalModel("tiny")
    filler = tokenize(shipped_text(), model.encode).ids.numpy()
    samples = needle_samples(filler, 120, 3, seed=0, stream=1, encode=lambda b: model.encode(b).numpy())
    model.set_scaling(LinearScaling(factor=6.0))  # positions squeezed 6x: answers far from certain, losses ~1
    full = torch.log_softmax(model.logits(samples.ids[:, :-1]).double(), dim=-1)  # (3, 119, vocab)
    expected = []
    for row, answer_len in enumerate(samples.answer_lens):
        for position in range(samples.length - answer_len, samples.length):
            expected.append(-full[row, position - 1, samples.ids[row, position]].item())
    assert 0.1 < float(np.mean(expected)) < 10
    np.testing.assert_allclose(answer_losses(model, samples).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_sets_are_seeded_and_disjoint():
    filler = np.arange(5000) % 200
    encode = lambda b: np.frombuffer(b, dtype=np.uint8).astype(np.int64)  # noqa: E731
    first = needle_samples(filler, 150, 4, seed=3, stream=1, encode=encode)
    again = needle_samples(filler, 150, 4, seed=3, stream=1, encode=encode)
    other = needle_samples(filler, 150, 4, seed=3, stream=2, encode=encode)
    assert torch.equal(first.ids, again.ids) and first.ids.shape == (4, 150)
    assert disjoint(first, other) and not disjoint(first, again)
