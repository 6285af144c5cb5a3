"""The verdict against a hand-made reference: each kind of difference is caught, float32 noise is not."""

from __future__ import annotations

import numpy as np

from ropekit.engines.probe import Answer, judge, make_probe


def _answer(probe, *, scale=0.25, logits=None) -> Answer:
    inv = 10000.0 ** -(np.arange(4) / 4)
    tables = {}
    for served in probe.served_lengths:
        p = np.array([x for x in probe.positions if x < served], dtype=np.float64)[:, None]
        tables[served] = np.stack([np.cos(p * inv), np.sin(p * inv)], axis=-1)
    return Answer(tables=tables, softmax_scale=scale, logits=logits)


def test_positions_and_served_lengths_cover_every_switch() -> None:
    probe = make_probe(64, 256, (64,))
    assert probe.positions == (0, 1, 63, 64, 65, 255) and probe.served_lengths == (64, 65, 256)


def test_noise_is_same_and_each_difference_differs() -> None:
    probe = make_probe(64, 256, ())
    reference = _answer(probe, logits=np.zeros((4, 3)))
    noisy = _answer(probe, logits=np.full((4, 3), 1e-4))
    noisy.tables[256] += 1e-5
    assert judge(reference, noisy, probe, known=[])[0] == "same"
    moved = _answer(probe, logits=np.zeros((4, 3)))
    moved.tables[256][3:] *= 1.01  # an attention factor 1 % off from position L0
    verdict, detail, _ = judge(reference, moved, probe, known=["a documented reason"])
    assert verdict == "differs" and "from position 64 " in detail and "a documented reason" in detail
    scaled = _answer(probe, scale=0.3, logits=np.zeros((4, 3)))
    assert judge(reference, scaled, probe, known=[])[0] == "differs"
    wrong_logits = _answer(probe, logits=np.eye(4, 3))
    verdict, detail, _ = judge(reference, wrong_logits, probe, known=[])
    assert verdict == "differs" and "not explained" in detail
