"""Are a server's prompt log-probabilities computed for the right position? A check with the server's own generation.

A completion with ``echo`` and ``logprobs`` reports, for each prompt token ``i``, ``log p(ids[i] | ids[:i])``: the
distribution the model gave *before* it read token ``i``. The reply's shape cannot show an error in which row that
comes from: llama-cpp-python 0.3.36's server (``Llama._create_completion``, ``logits_to_logprobs(self._scores)``
indexed by the token's own position) reports ``log p(ids[i] | ids[:i + 1])``, then nulls the first, so its list
has the right length, a leading ``null`` and the right token strings, and its perplexity on SmolLM2 is 86,287
instead of 12.1. The server's generation path has no such choice to get wrong: the first generated token's
log-probability is read from the distribution after the whole prompt. So: generate one greedy token ``g`` after a
prefix, then echo ``prefix + [g]``; aligned log-probabilities give ``g`` the same number at position
``len(prefix)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ropekit.eval.backends.openai import OpenAIEvalModel

#: prompt tokens the check sends (the generation's prefix)
PREFIX = 16
#: how close the echoed and generated log-probabilities of one token must be (both from one forward in float32)
TOLERANCE = 1e-3


def echo_offset_error(model: OpenAIEvalModel, ids: list[int]) -> str | None:
    """``None`` where ``model``'s server gives a prompt token the log-probability its own generation gives it, or
    where the check cannot be made (a reply without the numbers, a generated text that is not one token); else the
    reason, one line."""
    prefix = ids[: max(1, min(PREFIX, len(ids) - 1))]
    generated = model.complete(prefix, 1, logprobs=1)
    first = _numbers(generated)
    text = generated.get("text")
    if not first or first[0] is None or not isinstance(text, str) or not text:
        return None
    token = model.encode(text.encode()).tolist()
    if len(token) != 1:
        return None
    echoed = _numbers(model.complete(prefix + token, 1, echo=True, logprobs=1))
    if len(echoed) <= len(prefix) or echoed[len(prefix)] is None:
        return None
    want, got = first[0], echoed[len(prefix)]
    if abs(got - want) <= TOLERANCE * max(1.0, abs(want)):
        return None
    return (
        f"gives a prompt token the log-probability {got:.4g} where its own generation gives the same token after the "
        f"same tokens {want:.4g}: its prompt log-probabilities come from another position than the one that predicts "
        "each token (llama-cpp-python's server reads each from the row after the token)"
    )


def _numbers(choice: dict[str, Any]) -> list[float | None]:
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list):
        return []
    return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in values]
