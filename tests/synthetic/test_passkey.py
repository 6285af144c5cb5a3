"""Passkey episodes: exact length, the key where the episode says, the needle at the requested depth."""

from __future__ import annotations

import numpy as np
import pytest

from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.passkey import KEY_DIGITS, minimum_length, needle_text, passkey_episode

FILLER = np.frombuffer(b"abcdefghij" * 500, dtype=np.uint8)


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_episode_layout(depth):
    episode = passkey_episode(np.random.default_rng(1), FILLER, 300, depth, encode=byte_ids)
    text = bytes(episode.ids.astype(np.uint8))
    assert len(episode.ids) == 300
    assert text.endswith(episode.key.encode()) and len(episode.key) == KEY_DIGITS
    needle = needle_text(episode.key)
    assert text[episode.needle_start : episode.needle_start + len(needle)] == needle
    fill = 300 - len(needle) - len(b"\n# What is the pass key? The pass key is ") - KEY_DIGITS
    assert episode.needle_start == round(depth * fill)


def test_too_short_is_an_error():
    with pytest.raises(ValueError, match="length must be >="):
        passkey_episode(np.random.default_rng(0), FILLER, minimum_length(byte_ids) - 1, encode=byte_ids)
