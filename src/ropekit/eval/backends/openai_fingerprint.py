"""What a server computes, recorded beside what it reports: the greedy continuation of one fixed prompt longer than
the model's original length L0 (its text, and each token's log-probability where the server sends them), asked at
every start of a run that keeps an answer journal (:mod:`~ropekit.eval.backends.openai_journal`).

A server restarted with another RoPE keeps its URL, its model id and, on most servers, everything it reports:
llama-cpp-python has no ``/props`` and a constant ``/models`` entry, and llama-server's ``/props`` and vLLM's
``/models`` name no RoPE. What it computes changes: past L0 the positions a RoPE scaling rescales (and, for a scaling
that switches at L0, the only ones it touches) decide every logit. So a journal is resumed only where the continuation
is the same text and each log-probability lies within :data:`TOLERANCE` of the recorded one.

The prompt is the shipped held-out text's first ``L0 + MARGIN`` tokens, or as many as the server's context holds with
the continuation's :data:`BUDGET` where it reports its context. Where it reports none (llama-cpp-python), a prompt it
refuses with a 4xx reply (a context too short: refused before any computation) is shortened by a quarter until one is
taken, so the same server always gets the same prompt, and a server restarted with another context gets another
(named as ``prompt_tokens``). A server that sends no log-probabilities (llama-cpp-python's, unless started with
``--logits_all true``) is identified by the text alone.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit.eval.backends.openai_client import ServerError

if TYPE_CHECKING:
    from ropekit.eval.backends.openai import OpenAIEvalModel

__all__ = ["BUDGET", "MARGIN", "TOLERANCE", "computes_changes", "server_computes"]

#: prompt tokens past L0: where a scaling that switches at L0 (dynamic NTK, LongRoPE's long factors) acts
MARGIN = 64
#: greedy tokens asked after the prompt
BUDGET = 8
#: the shortest prompt tried on a server that refuses longer ones
SHORTEST = 64
#: nats two log-probabilities of one greedy token may differ by and still come from the same computation. A CPU
#: server (llama.cpp in float32) gives the same numbers to the same request; a GPU server in bfloat16 is not
#: batch-invariant: the same request batched with other traffic accumulates in another order, which can move a
#: logit by one bfloat16 step (2^-4 = 0.0625 for logits in [8, 16), 0.125 in [16, 32)), and the greedy token's
#: log-probability by up to that much. 0.25 is two such steps; a RoPE changed past L0 moves the continuation by
#: more, or changes its tokens (SmolLM2 served with ``--rope_freq_scale 0.125`` continues the prompt with another
#: text: tests/eval/backends/test_openai_server.py).
TOLERANCE = 0.25


def server_computes(model: OpenAIEvalModel) -> dict[str, Any]:
    """The greedy continuation of the fixed prompt by ``model``'s server: the prompt's length and SHA-256 (of its
    ids as int64), the text, and each token's log-probability (``None`` where the server sends none).

    Raises:
        ServerError: the server refuses every prompt down to :data:`SHORTEST` tokens, or cannot be reached.
    """
    longest = model.train_length + MARGIN
    if model.max_context is not None:
        longest = min(longest, model.max_context - BUDGET)
    ids = _text_ids(model.vocab.encode, max(longest, 1))
    length = len(ids)
    while True:
        prompt = _representable(model.vocab.as_text, ids[:length])
        try:
            plain = model.complete(prompt, BUDGET)
            break
        except ServerError as error:
            shorter = length * 3 // 4
            if error.status is None or not 400 <= error.status < 500 or shorter < SHORTEST:
                raise
            length = shorter
    try:
        scored = model.complete(prompt, BUDGET, logprobs=1)
    except ServerError:  # a server that computes no log-probabilities refuses the option
        scored = {}
    values = _logprobs(scored) if scored.get("text") == plain["text"] else None
    digest = hashlib.sha256(np.asarray(prompt, np.int64).tobytes()).hexdigest()
    return {"prompt_tokens": len(prompt), "prompt_sha256": digest, "text": plain["text"], "logprobs": values}


def computes_changes(recorded: Any, now: dict[str, Any]) -> list[str]:
    """What differs between two records of :func:`server_computes` (empty: the same computation), one phrase each."""
    if not isinstance(recorded, dict):
        return ["what the server computes: not recorded (a journal written without it)"]
    changes = []
    for key in ("prompt_tokens", "prompt_sha256"):
        if recorded.get(key) != now.get(key):
            changes.append(f"computes.{key}: {recorded.get(key)} → {now.get(key)}")
    if changes:
        return changes
    if recorded.get("text") != now.get("text"):
        return [
            f"the greedy continuation of the fixed prompt: {_quoted(recorded.get('text'))} → {_quoted(now['text'])}"
        ]
    old, new = recorded.get("logprobs"), now.get("logprobs")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        gaps = [abs(a - b) if _number(a) and _number(b) else float("inf") for a, b in zip(old, new, strict=True)]
        worst = max(range(len(gaps)), key=gaps.__getitem__, default=None)
        if worst is not None and gaps[worst] > TOLERANCE:
            return [
                f"the log-probability of greedy token {worst + 1} of the fixed prompt's continuation: {old[worst]} → "
                f"{new[worst]} (more than {TOLERANCE} apart)"
            ]
    elif old != new:
        return [f"the continuation's log-probabilities: {_sent(old)} → {_sent(new)}"]
    return []


def _text_ids(encode: Any, length: int) -> list[int]:
    """The first ``length`` token ids of the shipped held-out text (repeated as often as it takes)."""
    from ropekit.model.corpus import heldout_bytes

    data, size = heldout_bytes(), 8 * length
    while True:
        chunk = (data * (size // len(data) + 1))[:size]
        chunk = chunk[: chunk.rfind(b" ")] if b" " in chunk else chunk  # never split a character
        ids = encode(chunk).tolist()
        if len(ids) >= length or size > 64 * length:
            return ids[:length]
        size *= 2


def _representable(as_text: Any, ids: list[int]) -> list[int]:
    """``ids`` shortened by the fewest tokens (up to 16) whose text re-tokenises to them, for a server that takes
    only text; ``ids`` as they are where none does (a server that takes ids needs none)."""
    for cut in range(len(ids), max(len(ids) - 16, 0), -1):
        if as_text(ids[:cut]) is not None:
            return ids[:cut]
    return ids


def _logprobs(choice: dict[str, Any]) -> list[float] | None:
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list) or not values or not all(_number(v) for v in values):
        return None
    return [float(v) for v in values]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sent(values: Any) -> str:
    return "sent" if isinstance(values, list) else "not sent"


def _quoted(text: Any) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:57] + "..."
