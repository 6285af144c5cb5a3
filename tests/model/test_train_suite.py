"""Training batches with the RULER-style task mixture (``task_mix="suite"``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ropekit.model.tiny import TinyConfig
from ropekit.model.tokenizer import byte_ids
from ropekit.model.train import TrainConfig, make_batch, training_loss
from ropekit.synthetic.suite import check_task_weights, pick_task, suite_tasks

TASKS = suite_tasks("ruler")  # the training tasks: RULER's eleven (the tasks beyond them are evaluated only)

CORPUS = byte_ids(b"def f(x):\n    return x + 1\n" * 2000)


def test_suite_batches_are_exact_and_deterministic():
    config, train = TinyConfig(), TrainConfig(task_fraction=1.0, task_mix="suite", batch_size=32)
    batch = make_batch(CORPUS, config, train, 3)
    assert batch.shape == (32, config.train_length + 1)
    assert torch.equal(batch, make_batch(CORPUS, config, train, 3))
    texts = [bytes(row.numpy().astype(np.uint8)).decode() for row in batch]
    assert any("The pass key is" in t for t in texts)  # a quarter stay passkey episodes
    assert any("magic" in t for t in texts) and any("List:" in t or "VAR " in t for t in texts)


def test_passkey_mix_unchanged():
    config = TinyConfig()
    old = make_batch(CORPUS, config, TrainConfig(), 5)
    assert torch.equal(old, make_batch(CORPUS, config, TrainConfig(task_mix="passkey"), 5))


def test_bad_task_mix():
    with pytest.raises(ValueError, match="task_mix"):
        TrainConfig(task_mix="ruler")


@pytest.mark.parametrize("mix", ["suite", "passkey"])
def test_answer_lengths_mark_each_rows_answer(mix):
    """Each task row ends with its answer, right after the question's "is"/"are"; its pieces stand in the context."""
    config, train = TinyConfig(), TrainConfig(task_fraction=0.75, task_mix=mix, batch_size=32)
    batch, answers = make_batch(CORPUS, config, train, 7, with_answers=True)
    assert torch.equal(batch, make_batch(CORPUS, config, train, 7))
    assert (answers == 0).any() and (answers > 0).any()
    for row, answer in zip(batch, answers.tolist(), strict=True):
        text = bytes(row.numpy().astype(np.uint8)).decode()
        if answer == 0:  # a corpus window: no question
            assert "magic" not in text and "pass key" not in text
            continue
        context, tail = text[:-answer], text[-answer:]
        assert re.search(r"(is|are) ?$", context), (context[-40:], tail)
        pieces = [p for p in re.split(r"[ ,]+", tail) if p]
        question = context.rindex("\n")
        assert pieces and all(p in context[:question] for p in pieces), (tail, context[-60:])


def test_answer_weight_weighs_the_answer_tokens():
    """Σ w·ce / Σ w against the per-token cross-entropy summed over the answer and the rest separately."""
    torch.manual_seed(0)
    batch = torch.randint(0, 50, (3, 9))
    logits = torch.randn(3, 8, 50, dtype=torch.float64)
    answers = torch.tensor([2, 0, 5])
    ce = F.cross_entropy(logits.reshape(-1, 50), batch[:, 1:].reshape(-1), reduction="none").reshape(3, 8)
    on_answers = ce[0, -2:].sum() + ce[2, -5:].sum()
    for weight in (1.0, 4.0, 0.5):
        expected = ((ce.sum() - on_answers) + weight * on_answers) / (24 - 7 + weight * 7)
        assert training_loss(logits, batch, answers, weight).item() == pytest.approx(expected.item(), rel=1e-12)
    assert training_loss(logits, batch, answers, 1.0) == F.cross_entropy(
        logits.reshape(-1, 50), batch[:, 1:].reshape(-1)
    )


def test_pick_task_without_weights_is_the_uniform_draw_earlier_runs_saw():
    """``None`` keeps the data order of the runs the bundled model came from: one ``integers(11)`` draw."""
    names = list(TASKS)
    assert len(names) == 11
    ours, reference = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(200):
        assert pick_task(ours) == names[int(reference.integers(len(names)))]


def test_pick_task_follows_the_weights():
    """Frequencies over 40,000 draws against the closed form w / sum(w) (a task not named weighs 1)."""
    weights = {"vt": 3, "fwe": 2, "niah_single_1": 0}
    rng = np.random.default_rng(0)
    draws = [pick_task(rng, weights) for _ in range(40_000)]
    total = 3 + 2 + 0 + (len(TASKS) - 3)
    for name in TASKS:
        expected = weights.get(name, 1) / total
        assert abs(draws.count(name) / len(draws) - expected) < 0.01, name
    assert "niah_single_1" not in draws


def test_task_weights_shape_the_batches():
    """Only common-word extraction weighs anything: every suite row is a CWE list, the rest passkey episodes."""
    weights = {name: 0 for name in TASKS} | {"cwe": 1}
    train = TrainConfig(task_fraction=1.0, task_mix="suite", batch_size=32, task_weights=weights)
    batch = make_batch(CORPUS, TinyConfig(), train, 3)
    texts = [bytes(row.numpy().astype(np.uint8)).decode() for row in batch]
    assert all(("List:" in t and "appear most often" in t) or "The pass key is" in t for t in texts)
    assert sum("List:" in t for t in texts) > 16
    assert torch.equal(batch, make_batch(CORPUS, TinyConfig(), train, 3))


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"nope": 1}, "unknown task 'nope'"),
        ({"latent_hop": 1}, "unknown task 'latent_hop'; valid (RULER's tasks)"),  # evaluated, never trained on
        ({"vt": -1}, ">= 0"),
        ({"vt": float("nan")}, ">= 0"),
        ({"vt": "2"}, ">= 0"),
        (dict.fromkeys(TASKS, 0), "at least one"),
        ([("vt", 2)], "map task names"),
    ],
)
def test_bad_task_weights(weights, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainConfig(task_mix="suite", task_weights=weights)
    with pytest.raises(ValueError, match=re.escape(message)):
        check_task_weights(weights)


def test_task_weights_need_the_suite():
    with pytest.raises(ValueError, match="task_mix='suite'"):
        TrainConfig(task_weights={"vt": 2})
