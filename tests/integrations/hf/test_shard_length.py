"""RoPE on every shard of a sharded sequence (issue 56, item 2).

The hazard, shown on models built in code with transformers' own rotary modules: LongRoPE's list and dynamic NTK's
base are picked from ``max(position_ids) + 1`` of the current call, so a row of ``L0 < N <= sp·L0`` tokens sharded
over ``sp`` ranks is rotated with the short list (the original base) on the early ranks and the long one on the last.
Oracle: the same rotary module on the whole row (transformers as shipped), sliced to each shard.

Then ropekit's path: its patched rotary modules inside :func:`sequence_lengths` (the row's length read before it is
sharded) give every shard the unsharded row's tables, for LongRoPE, dynamic NTK and mixed windows (one row of packed
short documents, one long row, in one batch).
"""

from __future__ import annotations

import pytest
import torch

from helpers.hf_models import random_hf_model
from ropekit.integrations.hf.patch_rope import apply_scaling
from ropekit.integrations.hf.shard_length import row_lengths, sequence_lengths
from ropekit.scaling import DynamicScaling, LongRopeScaling

pytest.importorskip("transformers")
L0, SP = 64, 4  # a 128-token row on 4 ranks: 32-token shards, the first two within L0
ROW = 128
PAIRS = 8
SHORT = [1.0 + 0.25 * i for i in range(PAIRS)]
LONG = [1.0 + 1.5 * i for i in range(PAIRS)]
TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def _phi3():
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": SHORT, "long_factor": LONG}
    return random_hf_model(
        "phi3", positions=4 * L0, original_max_position_embeddings=L0, rope_parameters=rope, **TOKENS
    )


def _llama_dynamic():
    rope = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0}
    return random_hf_model("llama", positions=L0, rope_parameters=rope, **TOKENS)


def _shards(positions: torch.Tensor) -> list[torch.Tensor]:
    return list(positions.chunk(SP, dim=-1))  # (batch, ROW / SP) each, as Ulysses' data adapter cuts a row


def _rotate(model, positions: torch.Tensor) -> torch.Tensor:
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = model.model.rotary_emb(x, positions)
    return torch.cat((cos, sin), dim=-1)  # (batch, seq, 2·rotary_dim)


#: which ranks get another RoPE: LongRoPE switches lists at L0 (the shards whose largest position is below it); dynamic
#: NTK's base follows the length itself (every shard but the last)
WRONG_RANKS = {"longrope": [0, 1], "dynamic": [0, 1, 2]}


@pytest.mark.parametrize(
    ("build", "name"), [(_phi3, "longrope"), (_llama_dynamic, "dynamic")], ids=["longrope", "dynamic"]
)
def test_transformers_rotates_early_shards_with_another_rope(build, name):
    model = build()
    positions = torch.arange(ROW)[None]
    whole = _rotate(model, positions)  # the unsharded row's tables
    wrong = []
    for rank, shard in enumerate(_shards(positions)):
        mine = _rotate(build(), shard)  # each rank's own module, from its start
        piece = whole[:, rank * (ROW // SP) : (rank + 1) * (ROW // SP)]
        if (mine - piece).abs().max() > 1e-2:
            wrong.append(rank)
        else:
            torch.testing.assert_close(mine, piece, rtol=0, atol=1e-6)
    assert wrong == WRONG_RANKS[name]


@pytest.mark.parametrize(
    ("build", "scaling"),
    [
        (
            _phi3,
            LongRopeScaling(short_factor=tuple(SHORT), long_factor=tuple(LONG), original_max_position_embeddings=L0),
        ),
        (_llama_dynamic, DynamicScaling(factor=4.0, original_max_position_embeddings=L0)),
    ],
    ids=["longrope", "dynamic"],
)
def test_ropekit_rotates_every_shard_as_the_whole_row(build, scaling):
    reference = apply_scaling(build(), scaling)
    positions = torch.arange(ROW)[None]
    whole = _rotate(reference, positions)
    lengths = row_lengths(positions)
    for rank, shard in enumerate(_shards(positions)):
        model = apply_scaling(build(), scaling)
        unsharded_rule = _rotate(model, shard)  # without the row's length: the hazard is in ropekit's tables too
        with sequence_lengths(model, lengths):
            mine = _rotate(model, shard)
        piece = whole[:, rank * (ROW // SP) : (rank + 1) * (ROW // SP)]
        torch.testing.assert_close(mine, piece, rtol=0, atol=1e-6)
        if rank == 0:
            assert (unsharded_rule - piece).abs().max() > 1e-2
        assert model.model.rotary_emb.lengths is None  # the block restores the module


def test_mixed_windows_decide_each_row_by_its_whole_length():
    """A batch of one row of packed short documents (positions reset, every one below L0: the short list) and one
    long row: each shard of each row gets the tables of its whole row."""
    from ropekit.integrations.hf.mixed_window import use_mixed_window
    from ropekit.mixed_window import mixed_window_scaling

    scaling = mixed_window_scaling(
        LongRopeScaling(short_factor=tuple(SHORT), long_factor=tuple(LONG), original_max_position_embeddings=L0)
    )
    model = use_mixed_window(apply_scaling(_phi3(), scaling))
    packed = torch.cat([torch.arange(40), torch.arange(50), torch.arange(38)])  # three documents, all <= L0
    positions = torch.stack([packed, torch.arange(ROW)])  # (2, ROW)
    whole = _rotate(model, positions)
    lengths = row_lengths(positions)
    assert lengths.tolist() == [50, ROW]
    for rank, shard in enumerate(_shards(positions)):
        with sequence_lengths(model, lengths):
            mine = _rotate(model, shard)
        torch.testing.assert_close(mine, whole[:, rank * (ROW // SP) : (rank + 1) * (ROW // SP)], rtol=0, atol=1e-6)


def test_transformers_own_modules_are_refused_by_name():
    with pytest.raises(ValueError, match="transformers' own"), sequence_lengths(_phi3(), torch.tensor([ROW])):
        pass


def test_a_length_below_the_positions_is_refused():
    model = apply_scaling(_llama_dynamic(), DynamicScaling(factor=4.0, original_max_position_embeddings=L0))
    with (
        pytest.raises(ValueError, match="length must be above the largest position 127"),
        sequence_lengths(model, torch.tensor([100])),
    ):
        _rotate(model, torch.arange(ROW)[None])
