"""Greedy answers with a key/value cache: one prefill per context, shared by every question asked about it.

A decoder holds the tokens fed so far (as a cache) and gives logits for the last positions of what it is fed:

- :class:`TinyDecoder`: the bundled model with its own key/value cache (:mod:`ropekit.model.kv_cache`);
- :class:`HFDecoder`: a transformers causal LM with its own ``DynamicCache`` (cropped back after each question);
- :class:`FullDecoder`: no cache, the whole sequence again at every step (any model; the reference the cached
  decoders are tested against, and the fallback for Infini-attention models).

:func:`greedy_answer` asks one question: it feeds the question and the canonical answer in one pass (teacher
forcing) and reads where the greedy prediction first departs from the answer. Up to there greedy decoding would have
produced exactly the answer's tokens, so only the rest is generated token by token; when nothing departs, greedy
output starts with the whole canonical answer, which holds every reference, and decoding stops there (its score
cannot change). The result is token for token greedy decoding's, at the cost of one pass when the model is right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.models import HeadScoring
    from ropekit.model.tiny import TinyLM


class Decoder(Protocol):
    """Holds the tokens fed so far (``length`` of them) and gives logits for the last positions of what it is fed."""

    @property
    def length(self) -> int: ...

    def extend(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """Feed ``ids`` (1-D); return float32 logits ``(keep, vocab)`` for the last ``keep`` positions fed."""
        ...

    def crop(self, length: int) -> None:
        """Keep the first ``length`` tokens fed."""
        ...


class FullDecoder:
    """Recomputes the whole sequence at every call: ``model.hidden_states`` and ``model.output_logits``."""

    def __init__(self, model: HeadScoring) -> None:
        self.model = model
        self.ids = torch.zeros(0, dtype=torch.int64)

    @property
    def length(self) -> int:
        return len(self.ids)

    @torch.no_grad()
    def extend(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """Feed ``ids``; return float32 logits ``(keep, vocab)`` for the last ``keep`` positions fed."""
        self.ids = torch.cat([self.ids, ids.cpu()])
        if keep == 0:
            return torch.zeros(0)
        hidden = self.model.hidden_states(self.ids[None])[0, -keep:]  # (keep, d_model)
        return self.model.output_logits(hidden).float().cpu()

    def crop(self, length: int) -> None:
        self.ids = self.ids[:length]


class TinyDecoder:
    """The bundled model (:class:`ropekit.model.TinyLM`) with its own :class:`~ropekit.model.kv_cache.KVCache`."""

    def __init__(self, lm: TinyLM) -> None:
        from ropekit.model.kv_cache import KVCache

        if lm.config.position == "infini":
            raise ValueError("an Infini-attention model has no key/value cache; use FullDecoder")
        self.lm = lm
        self.cache = KVCache()

    @property
    def length(self) -> int:
        return self.cache.length(0)

    def extend(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """Feed ``ids`` (1-D); return float32 logits ``(keep, vocab)`` for the last ``keep`` of them.

        Runs on one thread: for a model this small, waking a second thread costs more than the work (50× more on a
        loaded 2-core machine).
        """
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                device = self.lm.embed.weight.device
                hidden = self.lm.hidden_states(ids[None].to(device), cache=self.cache)[0]  # (len(ids), d_model)
                if keep == 0:
                    return torch.zeros(0)
                return F.linear(hidden[len(ids) - keep :], self.lm.embed.weight).float().cpu()  # tied: (keep, vocab)
        finally:
            torch.set_num_threads(before)

    def crop(self, length: int) -> None:
        self.cache.crop(length)


class HFDecoder:
    """A transformers causal LM (its body, then the evaluation model's output head) with a ``DynamicCache``."""

    def __init__(self, eval_model: HFEvalModel) -> None:
        from transformers import DynamicCache

        self.eval_model = eval_model
        self.body = eval_model.model.base_model
        self.cache = DynamicCache(config=eval_model.model.config)
        # Sliding-window layers (Gemma 3) keep only their window: recording the past lets one crop undo the last
        # forward, and the marks (each such layer's state where a forward started) undo several.
        self.cache.activate_past_recording()
        self.marks: dict[int, list[tuple[Any, Any, int]]] = {}
        self.length = 0

    @staticmethod
    def _windowed(layer: Any) -> bool:
        return hasattr(layer, "sliding_window") and layer.is_initialized

    @torch.no_grad()
    def extend(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        if windowed := [layer for layer in self.cache.layers if self._windowed(layer)]:  # references suffice:
            # the cache replaces its tensors, never writes them in place
            self.marks[self.length] = [(layer.keys, layer.values, layer.cumulative_length) for layer in windowed]
        device = next(self.body.parameters()).device
        out = self.body(input_ids=ids[None].to(device), past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        self.length += len(ids)
        if keep == 0:
            return torch.zeros(0)
        return self.eval_model.output_logits(out.last_hidden_state[0, len(ids) - keep :]).float().cpu()

    def crop(self, length: int) -> None:
        if length >= self.length:
            return
        mark = iter(self.marks.get(length, ()))
        for layer in self.cache.layers:
            saved = next(mark, None) if self._windowed(layer) else None
            if saved is not None:
                layer.keys, layer.values, layer.cumulative_length = saved
            else:  # a negative crop removes that many tokens (a sliding-window layer takes no other)
                layer.crop(length - self.length)
        self.marks = {at: state for at, state in self.marks.items() if at <= length}
        self.length = length


@dataclass(frozen=True)
class Answer:
    """The greedy answer to one question.

    Attributes:
        tokens: generated token ids (stopped at ``budget``, a stop token, or the whole canonical answer).
        forward_tokens: tokens the model ran over for this question (question, answer, generated steps).
        shortcut: the teacher-forced pass matched the whole canonical answer.
    """

    tokens: list[int]
    forward_tokens: int
    shortcut: bool


def settled(tokens: list[int], refs: Sequence[str], budget: int) -> bool:
    """For a byte-level model (one token, at most one byte): can no further token change the string-match score?

    True when every reference is already in the output, or when none missing can still be completed: a missing
    reference needs its unmatched rest (after the longest suffix of the output that begins it) within the tokens
    left. Stopping there gives the score that decoding to the budget would give.
    """
    from ropekit.model.tokenizer import byte_text

    text = byte_text(tokens).lower()
    left = budget - len(tokens)
    missing = [ref.lower() for ref in refs if ref.lower() not in text]
    if not missing:
        return True
    for ref in missing:
        overlap = max((k for k in range(min(len(ref), len(text)), 0, -1) if text.endswith(ref[:k])), default=0)
        if len(ref) - overlap <= left:
            return False
    return True


def greedy_answer(
    decoder: Decoder,
    question: np.ndarray,
    target: np.ndarray,
    budget: int,
    stop: frozenset[int] = frozenset(),
    refs: Sequence[str] | None = None,
) -> Answer:
    """Greedy decoding of the answer to ``question`` after what ``decoder`` holds; the decoder is left as it was.

    Args:
        decoder: holds the context (``length`` tokens), e.g. after ``decoder.extend(context, keep=0)``.
        question: token ids of the question and answer prefix.
        target: the canonical answer (the teacher-forced shortcut); may be empty.
        budget: the most tokens to generate (>= ``len(target)`` for the shortcut to apply).
        stop: token ids that end generation (the tokenizer's end of sequence); a stop token is not returned.
        refs: for a byte-level model only, the references scored: decoding stops once :func:`settled` says no token
            can change the score (the score is the same; the tokens may be fewer).
    """
    base = decoder.length
    target = [int(t) for t in target][:budget]
    fed = torch.as_tensor(np.concatenate([question, np.asarray(target, dtype=np.int64)]), dtype=torch.int64)
    predicted = decoder.extend(fed, keep=len(target) + 1).argmax(-1).tolist()  # prediction after each fed token
    forward = len(fed)
    matched = 0
    while matched < len(target) and predicted[matched] == target[matched] and target[matched] not in stop:
        matched += 1
    tokens = target[:matched]
    if matched == len(target) and len(target) > 0:
        decoder.crop(base)
        return Answer(tokens, forward, True)
    decoder.crop(base + len(question) + matched)
    nxt = predicted[matched]
    while len(tokens) < budget and nxt not in stop:
        tokens.append(nxt)
        if len(tokens) == budget or (refs is not None and settled(tokens, refs, budget)):
            break
        nxt = int(decoder.extend(torch.tensor([nxt]), keep=1)[0].argmax())
        forward += 1
    decoder.crop(base)
    return Answer(tokens, forward, False)
