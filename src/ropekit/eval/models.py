"""The evaluation view of a model: final hidden states, an output head, and a way to swap its RoPE scaling.

Two implementations: the bundled tiny model (:class:`TinyEvalModel`) and any local transformers causal LM, from a
directory or a GGUF file (:class:`HFEvalModel`). :func:`load_eval_model` picks by what the path holds, or loads
another engine's (:mod:`ropekit.eval.engine_choice`).

Memory: an evaluation never holds ``(seq × vocab)`` logits. The model body runs once per window to its final
hidden states ``(batch, seq, d_model)``; the output head (with the model's own final-logit transforms, e.g.
Gemma's soft-capping: :mod:`ropekit.integrations.hf.output_head`, shared with fine-tuning) then runs on chunks of
positions, and the loss is accumulated in float32/float64 (:meth:`HeadScoring.token_losses`), or only the positions
whose prediction is needed get logits (:meth:`HeadScoring.predict_last`). Peak memory is the weights, one window's
activations and one chunk of logits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ropekit.config import RopeConfig
from ropekit.errors import MissingFile
from ropekit.eval.model_support import (  # noqa: F401  (DTYPES, guarded_logits, torch_dtype, is_tiny_checkpoint: imported from here too)
    DTYPES,
    guarded_logits,
    hf_description,
    is_out_of_memory,
    is_tiny_checkpoint,
    tokenizer_ids,
    tokenizer_stops,
    torch_dtype,
)
from ropekit.eval.protocol import AnswersAll, EvalModel, LogitsFunction  # noqa: F401  (imported from here too)
from ropekit.integrations.hf.output_head import (
    EVAL_CHUNK_BYTES,
    check_head,
    chunk_positions,
    chunked_cross_entropy,
    decoder,
    head_logits,
)
from ropekit.scaling.registry import ScalingConfig

if TYPE_CHECKING:
    from ropekit.attention.registry import AttentionConfig
    from ropekit.eval.engine_choice import Server
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


class HFEvalModel(HeadScoring, EvalModel):
    """:class:`EvalModel` over a local transformers causal LM: a directory, or a ``.gguf`` file (dequantised).

    Loaded offline with transformers' default attention (scaled-dot-product where transformers runs it for the
    architecture, else eager: Gemma 2's soft-capped attention from transformers 5.24) in ``dtype`` (``auto``: the
    checkpoint's own). After loading, the chunked head (body → final hidden states → output head → final-logit
    transforms) is checked against the model's own ``forward`` on a few tokens, so an architecture that
    transforms its logits in a way ropekit does not know is refused instead of mis-scored.

    Args:
        path: a transformers model directory or a GGUF file.
        device_map: transformers ``device_map`` (e.g. ``"auto"``, needs accelerate).
        dtype: one of :data:`DTYPES`.
        before_weights: called with the half-built model (config, tokenizer, ``train_length``, ``encode`` ready)
            before the weights load, e.g. to check that an evaluation text is long enough.
        weights: load the weights; ``False`` stops once ``before_weights`` has run (a tokenizer-only model).

    Raises:
        FileNotFoundError: no ``config.json`` (directory) or no such file. ValueError: not a RoPE model, no rotary
            module ropekit can replace, an unknown logit transform, or a bad ``dtype``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device_map: str | None = None,
        dtype: str = "auto",
        before_weights: Callable[[HFEvalModel], None] | None = None,
        weights: bool = True,
    ) -> None:
        try:
            from transformers import AutoConfig, AutoModelForCausalLM
        except ImportError as error:
            raise ValueError("evaluating a transformers model needs transformers: pip install 'ropekit[hf]'") from error
        from ropekit.integrations.hf.load import load_tokenizer, source_of
        from ropekit.integrations.hf.model_config import layer_types_of, original_length_of, rope_of, scaled_layer_types
        from ropekit.integrations.hf.patch_rope import rotary_modules

        chosen = torch_dtype(dtype)
        path = Path(path)
        self.name = str(path)
        self.gguf: dict[str, Any] | None = None
        reader = None  # a GGUF file's metadata, parsed once for its description and its RoPE
        if path.suffix == ".gguf":
            from ropekit.integrations.gguf.file import gguf_info
            from ropekit.integrations.hf.load import checked_gguf

            if not path.is_file():
                raise FileNotFoundError(f"GGUF file {str(path)!r} does not exist")
            reader = checked_gguf(path)
            self.gguf = gguf_info(path, reader=reader)
        elif not (path / "config.json").is_file():
            message = f"no config.json in {str(path)!r}: not a transformers model directory"
            raise MissingFile("path", str(path), message=message, leads=False)
        source, options = source_of(path)
        config = AutoConfig.from_pretrained(source, **options)
        if self.gguf is not None:
            from ropekit.integrations.gguf.read_rope import apply_gguf_rope

            apply_gguf_rope(config, path, reader=reader)  # llama.cpp's: transformers drops rope.scaling.*, rope_freqs
        native = rope_of(config)
        self.native_scaling = native.scaling
        self.rope = dataclasses.replace(native, scaling=None)
        self.train_length = original_length_of(config, native)
        self.layer_types = layer_types_of(config)
        from ropekit.integrations.hf.rope_layers import rope_layout

        #: which layers rotate q and k (``None``: every layer); scalings and attention methods reach those only
        self.rope_layout = rope_layout(config)
        #: the layer types set_scaling scales (the default rule until set_scaling is given others)
        self.scaled_layers = scaled_layer_types(config)
        self.tokenizer = load_tokenizer(path)
        self.vocab_size = int(getattr(config, "vocab_size", None) or config.get_text_config().vocab_size)
        self.separator = self._separator()
        self.stop_tokens = frozenset() if self.tokenizer is None else tokenizer_stops(self.tokenizer)
        self.byte_level = self.tokenizer is None
        if before_weights is not None:
            before_weights(self)
        if not weights:
            return
        load: dict[str, Any] = {**options, "dtype": chosen or "auto"}  # attention: transformers' default
        if self.gguf is None and chosen is None and getattr(config, "dtype", None) is None:
            load["dtype"] = torch.float32  # no dtype in config.json: transformers' own default
        if device_map is not None:
            load["device_map"] = device_map
        if self.gguf is not None:
            load["config"] = config  # with the RoPE read from the file
        self.model = AutoModelForCausalLM.from_pretrained(source, **load).eval()
        if self.gguf is not None and chosen is None:
            self.model.to(torch.float32)  # GGUF weights are dequantised; auto means float32 for them
        self.dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        self.attention = str(getattr(self.model.config, "_attn_implementation", "sdpa"))
        if not rotary_modules(self.model):
            raise ValueError(
                f"{type(self.model).__name__} has a RoPE config but no *RotaryEmbedding module called as "
                f"rotary_emb(x, position_ids) for ropekit to replace"
            )
        check_head(self.model)

    def _separator(self) -> list[int]:
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            return [int(self.tokenizer.eos_token_id)]
        return self.encode(b"\n\n").tolist()

    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def layer_sizes(self) -> tuple[int, int] | None:
        config = self.model.config
        hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
        ffn = getattr(config, "intermediate_size", None) or getattr(config, "ffn_dim", None)
        return (hidden, ffn) if hidden and ffn else None

    def set_scaling(self, scaling: ScalingConfig | None, *, layer_types: tuple[str, ...] | None = None) -> None:
        from ropekit.integrations.hf.patch_rope import apply_scaling

        apply_scaling(self.model, scaling, layer_types=layer_types)
        self.scaled_layers = getattr(self.model, "ropekit_scaled_layer_types", None)

    def set_attention(self, method: AttentionConfig | None) -> list[str] | None:
        from ropekit.integrations.hf.patch_attention import apply_attention

        return apply_attention(self.model, method).ropekit_attention_layer_types

    def decoder(self) -> Decoder:
        """The model's body with a transformers ``DynamicCache`` (:class:`~ropekit.eval.tasks.decode.HFDecoder`)."""
        from ropekit.eval.tasks.decode import HFDecoder

        return HFDecoder(self)

    def hidden_states(self, ids: torch.Tensor) -> torch.Tensor:
        return decoder(self.model)(input_ids=ids.to(self.device()), use_cache=False).last_hidden_state

    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return head_logits(self.model, hidden)  # (..., vocab) float32, the model's own final-logit transforms

    def encode(self, text: bytes) -> torch.Tensor:
        if self.tokenizer is not None:
            return tokenizer_ids(self.tokenizer, text)
        if self.vocab_size < 256:
            raise ValueError(f"{self.name!r} has no tokenizer and a vocabulary of {self.vocab_size} < 256 bytes")
        from ropekit.model.tokenizer import byte_ids

        return torch.from_numpy(byte_ids(text))

    def detokenize(self, tokens: list[int]) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)
        from ropekit.model.tokenizer import byte_text

        return byte_text(tokens)

    def describe(self) -> dict[str, Any]:
        return hf_description(self)


def load_eval_model(
    spec: str | Path = "tiny",
    *,
    dtype: str = "auto",
    device_map: str | None = None,
    before_weights: Callable[[EvalModel], None] | None = None,
    engine: str = "torch",
    server: Server | None = None,
    tokenizer_only: bool = False,
) -> EvalModel:
    """The evaluation model of ``spec`` on ``engine`` (``torch``: ``"tiny"`` or a tiny checkpoint directory →
    :class:`TinyEvalModel`, a transformers directory or ``.gguf`` file → :class:`HFEvalModel`; ``llamacpp`` and
    ``openai`` with ``server``: :mod:`ropekit.eval.engine_choice`). ``dtype`` (:data:`DTYPES`) and ``device_map``
    apply to ``torch``; ``before_weights`` runs before a transformers model's weights load (after, for the tiny one);
    ``tokenizer_only`` stops there (tokenizer, config and lengths only).

    Raises:
        InvalidArgument: a bad ``engine``, ``server``, ``dtype`` or ``device_map``, before anything loads; a
            :class:`~ropekit.errors.MissingFile` (about ``spec`` or ``path``) where no model is.
        ValueError: a model ropekit cannot evaluate.
    """
    from ropekit.eval.engine_choice import Server, check_engine, engine_model

    check_engine(engine, server or Server(), device_map=device_map, dtype=dtype)
    if engine != "torch":
        return engine_model(spec, engine, server or Server())
    torch_dtype(dtype)
    path = Path(spec)
    if str(spec) != "tiny" and not path.exists():
        message = f"model path {str(path)!r} does not exist (or use 'tiny' for the bundled model)"
        raise MissingFile("spec", str(path), message=message, leads=False)
    if is_tiny_checkpoint(spec):
        model = TinyEvalModel("tiny" if str(spec) == "tiny" else path, dtype=dtype)
        if before_weights is not None:
            before_weights(model)
        return model
    return HFEvalModel(
        path, device_map=device_map, dtype=dtype, before_weights=before_weights, weights=not tokenizer_only
    )
