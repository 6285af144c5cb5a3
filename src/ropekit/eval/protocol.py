"""The evaluation-model protocol: what every backend (the tiny model, transformers, llama.cpp, servers) gives the
evaluations, and the optional protocol of backends that answer whole samples at once. The implementations live in
:mod:`ropekit.eval.models` and the engine backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from ropekit.config import RopeConfig
from ropekit.scaling.registry import ScalingConfig

if TYPE_CHECKING:
    from ropekit.attention.registry import AttentionConfig
    from ropekit.eval.tasks.decode import Decoder


#: a plain ``(batch, seq)`` ids → ``(batch, seq, vocab)`` logits function (a synthetic model, a test's oracle), which
#: perplexity and passkey accept beside an :class:`EvalModel`
LogitsFunction = Callable[[torch.Tensor], torch.Tensor]


@runtime_checkable
class EvalModel(Protocol):
    """What the evaluations need from a model.

    A backend subclasses this protocol (so it gets the defaults of the optional members) or declares every member
    itself. The optional members, with their defaults here: ``max_positions`` (no hard limit), ``set_attention``
    (no attention method), ``decoder`` (none: the model answers whole samples, :class:`AnswersAll`), ``ran_as``
    (nothing learnt), ``layer_sizes`` (unknown) and ``device`` (the CPU).
    """

    name: str
    #: the length the model was trained at (the "original length" of every scaling method)
    train_length: int
    #: the model's RoPE without any scaling applied by the evaluation
    rope: RopeConfig
    #: the model's own scaling (e.g. Phi-3's LongRoPE factors), or None
    native_scaling: ScalingConfig | None
    #: token ids put between two documents of an evaluation text (the tokenizer's end-of-sequence token)
    separator: list[int]
    #: token ids that end a generated answer (the tokenizer's end of sequence; none for byte-level models)
    stop_tokens: frozenset[int]
    #: every token is at most one byte (answers may stop early once no token can change the score)
    byte_level: bool
    #: positions at or beyond this raise (evaluations check lengths against it first); ``None``: no hard limit
    max_positions: int | None = None

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        """Use ``scaling`` from now on (``None``: plain RoPE with the model's base)."""

    def set_attention(self, method: AttentionConfig | None) -> list[str] | None:
        """Attend with ``method`` from now on (``None``: plain attention).

        Returns:
            On a model with one RoPE per layer type (Gemma 3), the layer types that got the method; ``None`` otherwise.

        Raises:
            LookupError: the model cannot run ``method`` (a sweep skips the method).
        """
        if method is not None:
            raise LookupError(f"{self.name} runs no attention method of ropekit's ({method.name})")
        return None

    def token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """1-D ids → ``(len(ids) - 1,)`` float64 negative log-likelihood of ``ids[1:]`` given the prefix."""

    def predict_last(self, ids: torch.Tensor, count: int) -> torch.Tensor:
        """``(batch, seq)`` ids → ``(batch, count)`` greedy next-token predictions at the last ``count`` positions."""

    def decoder(self) -> Decoder:
        """A decoder over an empty key/value cache (:mod:`ropekit.eval.tasks.decode`): the fastest exact one."""
        raise ValueError(f"{self.name} answers whole samples (answer_all), not token by token")

    def encode(self, text: bytes) -> torch.Tensor:
        """Text → 1-D int64 ids."""

    def detokenize(self, tokens: list[int]) -> str:
        """Generated ids → the answer's text (special tokens dropped)."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready description recorded with every result."""

    def ran_as(self) -> dict[str, Any]:
        """What the model learnt about itself while it ran (a server: how it took the prompts), recorded over its
        description once a run ends."""
        return {}

    def layer_sizes(self) -> tuple[int, int] | None:
        """``(hidden size, MLP size)`` for a memory estimate; ``None`` when unknown."""
        return None

    def device(self) -> torch.device:
        """Where the model's weights are (its free memory is what an evaluation may use)."""
        return torch.device("cpu")


@runtime_checkable
class AnswersAll(Protocol):
    """A model that answers whole samples at once (a server with its bounded pool of requests) and can keep its
    answers in a journal to resume from."""

    def answer_all(self, samples: list[Any], on_sample: Callable[[Any], None] | None = None) -> dict[int, Any]:
        """``{id(sample): (answer texts, forward tokens)}`` for every sample; ``on_sample`` after each."""

    def resume_from(self, journal: Path, *, fresh: bool = False) -> None:
        """Keep answers in ``journal`` and reuse those it holds (``fresh``: forget them, start it again)."""
