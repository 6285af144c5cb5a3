"""The evaluation view of a model: final hidden states, an output head, and a way to swap its RoPE scaling.

Two implementations: the bundled tiny model (:class:`TinyEvalModel`, here) and any local transformers causal LM,
from a directory or a GGUF file (:class:`~ropekit.eval.hf_model.HFEvalModel`).
:func:`ropekit.eval.loader.load_eval_model` picks by what the path holds, or loads another engine's
(:mod:`ropekit.eval.engine_choice`).

Memory: an evaluation never holds ``(seq × vocab)`` logits. The model body runs once per window to its final
hidden states ``(batch, seq, d_model)``; the output head (with the model's own final-logit transforms, e.g.
Gemma's soft-capping: :mod:`ropekit.integrations.hf.output_head`, shared with fine-tuning) then runs on chunks of
positions, and the loss is accumulated in float32/float64 (:meth:`HeadScoring.token_losses`), or only the positions
whose prediction is needed get logits (:meth:`HeadScoring.predict_last`). Peak memory is the weights, one window's
activations and one chunk of logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ropekit.config import RopeConfig
from ropekit.eval.model_support import guarded_logits, torch_dtype
from ropekit.eval.protocol import EvalModel
from ropekit.integrations.hf.output_head import EVAL_CHUNK_BYTES, chunk_positions, chunked_cross_entropy
from ropekit.scaling.registry import ScalingConfig

if TYPE_CHECKING:
    from ropekit.attention.registry import AttentionConfig
    from ropekit.eval.tasks.decode import Decoder


class HeadScoring:
    """Losses and greedy predictions from ``hidden_states`` and ``output_logits``, without ``(seq × vocab)`` logits.

    Subclasses define ``hidden_states(ids) -> (batch, seq, d_model)`` (the body up to and including the final
    norm), ``output_logits(hidden) -> (..., vocab)`` float32 (the output head and the model's own final-logit
    transforms) and ``vocab_size``.
    """

    vocab_size: int
    #: positions per chunk of logits; ``None``: from :data:`~ropekit.integrations.hf.output_head.EVAL_CHUNK_BYTES` and the vocabulary
    chunk: int | None = None

    def hidden_states(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _hidden(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return guarded_logits(self.hidden_states, ids)

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """``(batch, seq)`` ids → ``(batch, seq, vocab)`` float32 logits, all at once (for short inputs and tests)."""
        return self.output_logits(self._hidden(ids)).float().cpu()

    @torch.no_grad()
    def token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood of ``ids[1:]`` given the prefix, logits formed ``chunk`` positions at a time.

        Shapes:
            ids ``(seq,)`` → ``(seq - 1,)`` float64 (cross-entropy in float32 per chunk, as a full-logits
            evaluation computes it).
        """
        hidden = self._hidden(ids[None, :-1])[0]  # (seq - 1, d_model)
        targets = ids[1:].to(hidden.device)
        chunk = self.chunk or chunk_positions(self.vocab_size, EVAL_CHUNK_BYTES)
        return chunked_cross_entropy(self.output_logits, hidden, targets, chunk=chunk).double().cpu()

    @torch.no_grad()
    def predict_last(self, ids: torch.Tensor, count: int) -> torch.Tensor:
        """Greedy predictions at the last ``count`` positions; logits exist only for those positions.

        Shapes:
            ids ``(batch, seq)`` → ``(batch, count)`` int64: the argmax prediction of the token after each position.
        """
        hidden = self._hidden(ids)[:, ids.shape[1] - count :]  # (batch, count, d_model)
        return self.output_logits(hidden).float().argmax(-1).cpu()

    def decoder(self) -> Decoder:
        """:class:`~ropekit.eval.tasks.decode.FullDecoder`: no cache, the whole sequence again at every step."""
        from ropekit.eval.tasks.decode import FullDecoder

        return FullDecoder(self)


class TinyEvalModel(HeadScoring, EvalModel):
    """:class:`EvalModel` over a :class:`ropekit.model.TinyLM` checkpoint (byte tokens, tied output head)."""

    def __init__(self, name_or_path: str | Path = "tiny", *, dtype: str = "auto") -> None:
        from ropekit.model import load, metadata
        from ropekit.model.corpus import SEPARATOR

        chosen = torch_dtype(dtype)
        self.model = load(name_or_path).eval()
        if chosen is not None:
            self.model.to(chosen)
        self.dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        self.name = str(name_or_path)
        self._meta = metadata(name_or_path)
        config = self.model.config
        self.train_length = config.train_length
        #: positions at or beyond this raise (the model's cos/sin tables); evaluations check lengths against it first
        self.max_positions = config.max_positions
        self.rope = RopeConfig(config.head_dim, base=config.rope_base)
        self.native_scaling = config.scaling
        self.vocab_size = config.vocab_size
        self.separator = self.encode(SEPARATOR).tolist()
        self.stop_tokens: frozenset[int] = frozenset()
        self.byte_level = True

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        """Raises ``LookupError`` (a sweep skips the method) for a scaling on a model without RoPE to scale."""
        position = self.model.config.position
        if position != "rope":
            if scaling is None:
                return
            raise LookupError(f"position={position!r} model: no RoPE to scale, only method 'none' applies")
        self.model.set_scaling(scaling)

    def set_attention(self, method: AttentionConfig | None) -> list[str] | None:
        """Raises ``LookupError`` for an attention method on a model without RoPE."""
        if method is not None and self.model.config.position != "rope":
            raise LookupError(f"position={self.model.config.position!r} model: attention methods need RoPE")
        self.model.set_attention(method)
        return None

    def decoder(self) -> Decoder:
        """The model's own key/value cache (:class:`~ropekit.eval.tasks.decode.TinyDecoder`); Infini-attention,
        which has none: :class:`~ropekit.eval.tasks.decode.FullDecoder`."""
        from ropekit.eval.tasks.decode import TinyDecoder

        return super().decoder() if self.model.config.position == "infini" else TinyDecoder(self.model)

    def layer_sizes(self) -> tuple[int, int] | None:
        return self.model.config.d_model, self.model.config.ffn_dim

    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def hidden_states(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.hidden_states(ids)  # TinyLM up to its final norm (Infini-attention: segment by segment)

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.model.embed.weight).float()  # tied embeddings: (..., vocab)

    def encode(self, text: bytes) -> torch.Tensor:
        from ropekit.model.tokenizer import byte_ids

        return torch.from_numpy(byte_ids(text))

    def detokenize(self, tokens: list[int]) -> str:
        from ropekit.model.tokenizer import byte_text

        return byte_text(tokens)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "ropekit-tiny",
            "name": self.name,
            "parameters": self.model.num_parameters(),
            "dtype": self.dtype,
            "attention": "sdpa",
            "config": self.model.config.to_dict(),
            "heldout_bpb": self._meta.get("heldout_bpb"),
            **({"gates": self.model.gate_values()} if self.model.config.position == "infini" else {}),
        }
