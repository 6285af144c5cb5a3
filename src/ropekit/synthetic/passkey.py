"""Synthetic retrieval episodes (passkey, Mohtashami & Jaggi, arXiv 2305.16300) built from filler text.

An episode is ``filler … needle … filler … question answer``: the needle states a random 5-digit key, the
question at the end asks for it, and the answer is the key. Mixed into training so that the tiny model
learns to copy from far back; evaluated by whether the model's greedy prediction of all five answer
bytes is right (checked in one teacher-forced pass, which is equivalent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

KEY_DIGITS = 5


def needle_text(key: str) -> bytes:
    return f"\n# The pass key is {key}. Remember it. {key} is the pass key.\n".encode()


def question_text() -> bytes:
    return b"\n# What is the pass key? The pass key is "


@dataclass(frozen=True)
class Episode:
    """One passkey episode.

    Attributes:
        ids: ``(length,)`` int64 token ids; the last ``answer_len`` are the answer.
        needle_start: index of the needle's first byte.
        key: the answer digits.
    """

    ids: np.ndarray
    needle_start: int
    key: str
    answer_len: int = KEY_DIGITS

    @property
    def distance(self) -> int:
        """How far the answer is from the needle, in tokens."""
        return len(self.ids) - self.needle_start


def minimum_length(encode: Callable[[bytes], np.ndarray]) -> int:
    """The shortest episode that fits needle, question and answer, in the tokens of ``encode`` (text → token ids)."""
    key = "0" * KEY_DIGITS
    return len(encode(needle_text(key))) + len(encode(question_text())) + len(encode(key.encode())) + 1


def passkey_episode(
    rng: np.random.Generator,
    filler: np.ndarray,
    length: int,
    depth: float | None = None,
    *,
    encode: Callable[[bytes], np.ndarray],
) -> Episode:
    """Build an episode of exactly ``length`` tokens.

    Args:
        rng: source of the key, the filler offset and (if ``depth`` is None) the depth.
        filler: token ids of text to fill with (a random contiguous slice is taken).
        length: total tokens, >= :func:`minimum_length`.
        depth: needle position as a fraction of the filler (0 = start, 1 = just before the question);
            ``None`` draws it uniformly.
        encode: text → token ids for the needle, question and key (the model's own tokenizer).
    """
    if length < minimum_length(encode):
        raise ValueError(f"length must be >= {minimum_length(encode)} for a passkey episode, got {length}")
    key = "".join(str(d) for d in rng.integers(0, 10, KEY_DIGITS))
    needle, question, answer = encode(needle_text(key)), encode(question_text()), encode(key.encode())
    fill = length - len(needle) - len(question) - len(answer)
    if len(filler) <= fill:
        raise ValueError(f"filler has {len(filler)} tokens, an episode of length {length} needs more than {fill}")
    start = int(rng.integers(0, len(filler) - fill))
    text = np.asarray(filler[start : start + fill], dtype=np.int64)
    depth = float(rng.random()) if depth is None else depth
    cut = round(depth * fill)
    ids = np.concatenate([text[:cut], needle, text[cut:], question, answer]).astype(np.int64)
    return Episode(ids, cut, key, len(answer))
