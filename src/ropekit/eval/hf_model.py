"""The evaluation view of any local transformers causal LM, from a directory or a GGUF file (dequantised).

Reading it is three steps, each its own method: the config (with the RoPE llama.cpp reads from a GGUF file), the
tokenizer, and the weights (optional: a tokenizer-only model stops before them). Scoring is
:class:`~ropekit.eval.models.HeadScoring`'s: the body once per window, the output head on chunks of positions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ropekit.errors import MissingFile
from ropekit.eval.model_support import hf_description, tokenizer_ids, tokenizer_stops, torch_dtype
from ropekit.eval.models import HeadScoring
from ropekit.eval.protocol import EvalModel
from ropekit.integrations.hf.output_head import check_head, decoder, head_logits
from ropekit.scaling.registry import ScalingConfig

if TYPE_CHECKING:
    from ropekit.attention.registry import AttentionConfig
    from ropekit.eval.tasks.decode import Decoder


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
        dtype: one of :data:`~ropekit.eval.model_support.DTYPES`.
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
        chosen = torch_dtype(dtype)
        config, source, options, reader = self._read_config(Path(path))
        self._read_tokenizer()
        if before_weights is not None:
            before_weights(self)
        if weights:
            self._load_weights(
                source, {**options, "config": config} if reader is not None else options, chosen, device_map, config
            )

    def _read_config(self, path: Path) -> tuple[Any, str, dict[str, Any], Any]:
        """Reads the folder's (or GGUF file's) config as transformers does, with the RoPE llama.cpp reads from a GGUF
        file, and sets the RoPE attributes; returns ``(config, source, loading options, the GGUF reader or None)``."""
        try:
            from transformers import AutoConfig
        except ImportError as error:
            raise ValueError("evaluating a transformers model needs transformers: pip install 'ropekit[hf]'") from error
        from ropekit.integrations.hf.load import source_of
        from ropekit.integrations.hf.model_config import layer_types_of, original_length_of, rope_of, scaled_layer_types
        from ropekit.integrations.hf.rope_layers import rope_layout

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
        if reader is not None:
            from ropekit.integrations.gguf.read_rope import apply_gguf_rope

            apply_gguf_rope(config, path, reader=reader)  # llama.cpp's: transformers drops rope.scaling.*, rope_freqs
        native = rope_of(config)
        self.native_scaling = native.scaling
        self.rope = dataclasses.replace(native, scaling=None)
        self.train_length = original_length_of(config, native)
        self.layer_types = layer_types_of(config)
        #: which layers rotate q and k (``None``: every layer); scalings and attention methods reach those only
        self.rope_layout = rope_layout(config)
        #: the layer types set_scaling scales (the default rule until set_scaling is given others)
        self.scaled_layers = scaled_layer_types(config)
        self.vocab_size = int(getattr(config, "vocab_size", None) or config.get_text_config().vocab_size)
        return config, source, options, reader

    def _read_tokenizer(self) -> None:
        """The model's tokenizer (``None``: byte-level ids), its separator and stop tokens."""
        from ropekit.integrations.hf.load import load_tokenizer

        self.tokenizer = load_tokenizer(Path(self.name))
        self.separator = self._separator()
        self.stop_tokens = frozenset() if self.tokenizer is None else tokenizer_stops(self.tokenizer)
        self.byte_level = self.tokenizer is None

    def _load_weights(
        self, source: str, options: dict[str, Any], chosen: torch.dtype | None, device_map: str | None, config: Any
    ) -> None:
        """Loads the weights offline with transformers' default attention and checks the chunked head against the
        model's own ``forward``."""
        from transformers import AutoModelForCausalLM

        from ropekit.integrations.hf.patch_rope import rotary_modules

        load: dict[str, Any] = {**options, "dtype": chosen or "auto"}  # attention: transformers' default
        if self.gguf is None and chosen is None and getattr(config, "dtype", None) is None:
            load["dtype"] = torch.float32  # no dtype in config.json: transformers' own default
        if device_map is not None:
            load["device_map"] = device_map
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
