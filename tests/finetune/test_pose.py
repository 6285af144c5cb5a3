"""PoSE position ids (Zhu et al. 2023, §3.2): properties every draw must have, and coverage over many draws.

Oracle: the definition — strictly increasing ids in ``[0, target)`` starting at 0, the window cut into at most
``chunks`` runs of consecutive ids, every relative distance ``1 … target − 1`` reached by some sample, and the same
seed giving the same ids.
"""

from __future__ import annotations

import pytest
import torch

from ropekit.finetune.pose import PoseSettings

SETTINGS = [
    PoseSettings(window=8, target_length=32),
    PoseSettings(window=8, target_length=32, chunks=3, seed=5),
    PoseSettings(window=16, target_length=17, chunks=4),
    PoseSettings(window=5, target_length=200, chunks=5, seed=1),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"W{s.window}-T{s.target_length}-N{s.chunks}")
def test_every_draw_is_increasing_in_range_from_zero_in_contiguous_chunks(settings: PoseSettings) -> None:
    for index in range(300):
        ids = settings.position_ids(index)
        steps = ids.diff()
        assert ids.shape == (settings.window,) and ids.dtype == torch.int64
        assert int(ids[0]) == 0 and int(ids[-1]) < settings.target_length
        assert bool((steps >= 1).all())  # strictly increasing
        assert int((steps > 1).sum()) <= settings.chunks - 1  # at most chunks runs of consecutive ids


@pytest.mark.parametrize("settings", SETTINGS[:2], ids=["two-chunks", "three-chunks"])
def test_every_relative_distance_up_to_the_target_occurs(settings: PoseSettings) -> None:
    seen = set()
    for index in range(3000):
        ids = settings.position_ids(index)
        seen.update((ids[None, :] - ids[:, None])[torch.triu_indices(len(ids), len(ids), 1).unbind()].tolist())
    assert seen == set(range(1, settings.target_length))


def test_the_same_seed_gives_the_same_ids_and_another_seed_others() -> None:
    first, again = PoseSettings(window=8, target_length=64, seed=3), PoseSettings(window=8, target_length=64, seed=3)
    other = PoseSettings(window=8, target_length=64, seed=4)
    indices = torch.arange(20)
    assert torch.equal(first.batch(indices), again.batch(indices))
    assert first.batch(indices).shape == (20, 8)
    assert not torch.equal(first.batch(indices), other.batch(indices))
    assert not torch.equal(first.position_ids(0), first.position_ids(1))  # each sample draws its own


def test_no_room_to_skip_gives_plain_positions() -> None:
    for settings in (PoseSettings(window=8, target_length=8), PoseSettings(window=8, target_length=40, chunks=1)):
        assert torch.equal(settings.position_ids(7), torch.arange(8))


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"window": 1, "target_length": 8}, ValueError, "window must be an integer >= 2"),
        ({"window": 8, "target_length": 4}, ValueError, "target_length must be an integer >= 8"),
        ({"window": 8, "target_length": 16, "chunks": 0}, ValueError, "chunks must be an integer >= 1"),
        ({"window": 8, "target_length": 16, "chunks": 9}, ValueError, "chunks must be at most window=8"),
        ({"window": 8.0, "target_length": 16}, TypeError, "window must be an integer"),
        ({"window": 8, "target_length": 16, "seed": -1}, ValueError, "seed must be an integer >= 0"),
    ],
)
def test_bad_settings_name_the_field(fields, error, match) -> None:
    with pytest.raises(error, match=match):
        PoseSettings(**fields)
