"""Evaluation through llama.cpp (llama-cpp-python): a GGUF file run by the engine users serve it with.

:class:`LlamaCppEvalModel` implements the evaluation-model protocol (:class:`ropekit.eval.protocol.EvalModel`), so
``run_tasks``, ``perplexity_at`` and ``passkey_grid`` drive it as they drive the torch models:

- token ids come from transformers' reading of the file's tokenizer, as on the torch path, so the samples are the
  same token ids on both engines (llama.cpp's own tokenizer splits some whitespace runs differently: SmolLM2's
  shipped-text ids differ from the 11,643rd token on); without transformers, from llama.cpp's tokenizer
  (``describe()["tokenizer"]`` says which);
- a scaling method is run through llama.cpp's load-time RoPE options
  (:func:`ropekit.integrations.gguf.llamacpp_rope.llamacpp_options`): plain RoPE with any base, linear and YaRN; a
  method that needs per-pair factors is skipped with
  the reason (write it into the file with ``ropekit extend --out x.gguf`` and evaluate that file's ``native``);
- answers share one prefill per haystack: :class:`LlamaCppDecoder` feeds tokens into llama.cpp's key/value cache and
  cuts it back (``llama_memory_seq_rm``) after each question, with logits only for the positions asked for;
- perplexity comes from llama.cpp's float32 logits, ``n_batch`` positions at a time, cross-entropy in float32 per
  position as the torch path computes it, summed in float64.

Precision: llama.cpp's own (the file's quantised weights, activations quantised to 8 bits for the matrix products,
float32 angles, an f16 key/value cache). Attention methods (Self-Extend, ...) are not available in llama.cpp.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ropekit.config import RopeConfig
from ropekit.eval.protocol import EvalModel
from ropekit.scaling.registry import ScalingConfig

#: tokens fed per llama_decode call by default (n_batch = n_ubatch), and rows of logits held at once in perplexity
N_BATCH = 512
#: room left in a new context beyond the first tokens fed (a question and its answer budget)
CONTEXT_MARGIN = 1024


def file_scaling(path: Path, head_dim: int, *, reader: Any = None) -> ScalingConfig | None:
    """The RoPE scaling llama.cpp runs for the file (``None`` for plain RoPE), as a ropekit scaling (read from
    ``reader``, the file's ``open_gguf``, where given)."""
    from ropekit.hf_format import from_hf_config
    from ropekit.integrations.gguf.read_rope import gguf_rope_parameters

    params = gguf_rope_parameters(path, reader=reader)
    return None if params is None else from_hf_config({"head_dim": head_dim, "rope_parameters": params}).scaling


def transformers_tokenizer(path: Path) -> Any:
    """transformers' reading of the file's tokenizer (the torch path's), or ``None`` without transformers."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return None
    from ropekit.integrations.hf.load import load_tokenizer

    return load_tokenizer(path)


class LlamaCppEvalModel(EvalModel):
    """A GGUF file evaluated by llama.cpp; the :class:`~ropekit.eval.protocol.EvalModel` protocol.

    The weights load when the first context is made (sized to the longest input so far plus
    :data:`CONTEXT_MARGIN`), and again when a method changes llama.cpp's RoPE options.

    Args:
        path: the GGUF file.
        threads: llama.cpp's threads (default: torch's, so both engines get the same cores).
        flash_attn: llama.cpp's flash attention (its CPU kernel never writes the attention scores out).
        batch: tokens per ``llama_decode`` call (llama.cpp's ``n_batch`` and ``n_ubatch``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file's RoPE uses inputs ropekit does not model.
        LlamaCppUnavailable (a ValueError): llama-cpp-python is missing, or a child process could not run the file
            (its library crashed, e.g. built for instructions this machine does not run): the reason, one line.
    """

    def __init__(
        self, path: str | Path, *, threads: int | None = None, flash_attn: bool = False, batch: int = N_BATCH
    ) -> None:
        from ropekit.eval.backends.llamacpp_probe import require_llama_cpp
        from ropekit.integrations.gguf.read_rope import open_gguf, read_file_rope

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {str(path)!r} does not exist")
        if batch < 1:
            raise ValueError(f"batch must be a positive number of tokens, got {batch}")
        self.llama_cpp = require_llama_cpp(path)  # a child process runs the file first: its crash stays there
        self.path, self.name = path, str(path)
        self.threads = threads or torch.get_num_threads()
        self.flash_attn, self.batch = bool(flash_attn), int(batch)
        reader = open_gguf(path)  # the metadata parsed once for the RoPE and its scaling
        self.file = read_file_rope(path, reader=reader)
        rope = self.file.rope
        self.native_scaling = file_scaling(path, rope.n_rot, reader=reader)
        self.rope = RopeConfig(rope.n_rot, base=rope.freq_base)
        original = getattr(self.native_scaling, "original_max_position_embeddings", None)
        self.train_length = int(original or self.file.context_length)
        self.vocab = self.llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        self.vocab_size = self.vocab.n_vocab()
        self.tokenizer = transformers_tokenizer(path)
        if self.tokenizer is not None:
            from ropekit.eval.model_support import tokenizer_stops

            self.stop_tokens = tokenizer_stops(self.tokenizer)
        else:
            eos = int(self.vocab.token_eos())
            self.stop_tokens = frozenset({eos}) if eos >= 0 else frozenset()
        self.byte_level = False
        self.separator = sorted(self.stop_tokens)[:1] or self.encode(b"\n\n").tolist()
        self.options: dict[str, float | int] = {}
        self.llm: Any = None
        self._made: tuple[tuple[Any, ...], int] | None = None

    def set_scaling(self, scaling: ScalingConfig | None) -> None:
        """Run ``scaling`` from now on: the file as it is for its own scaling, else llama.cpp's RoPE options.

        Raises:
            LookupError: llama.cpp's options cannot express ``scaling`` on this file (a sweep skips the method).
        """
        from ropekit.integrations.gguf.llamacpp_rope import llamacpp_options, to_llamacpp

        if scaling == self.native_scaling:
            self.options = {}
            return
        file = self.file.rope
        if file.freq_factors is not None or file.attn_factor != 1.0:
            raise LookupError(
                f"{self.path.name} carries its own RoPE factors, which llama.cpp's options cannot remove: only its "
                "native scaling runs on it (write the method into a file with `ropekit extend --out NAME.gguf`)"
            )
        try:
            form = to_llamacpp(dataclasses.replace(self.rope, scaling=scaling), rope_freqs=False, betas=True)
            self.options = llamacpp_options(form)
        except ValueError as error:
            raise LookupError(f"llama.cpp cannot run it from options: {error}") from error

    def set_attention(self, method: Any) -> list[str] | None:
        """Raises ``LookupError`` for any attention method (llama.cpp runs none of ropekit's)."""
        if method is not None:
            raise LookupError(f"llama.cpp runs no attention method of ropekit's ({method.name})")
        return None

    def context(self, tokens: int) -> Any:
        """The llama.cpp model and context with the current options, holding at least ``tokens`` positions."""
        key = tuple(sorted(self.options.items()))
        if self._made is not None and self._made[0] == key and self._made[1] >= tokens + CONTEXT_MARGIN:
            return self.llm
        size = -(-(tokens + CONTEXT_MARGIN) // 256) * 256
        if self._made is not None and self._made[0] == key:
            size = max(size, self._made[1])
        self.close()
        self.llm = self.llama_cpp.Llama(
            str(self.path),
            n_ctx=size,
            n_batch=self.batch,
            n_ubatch=self.batch,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            flash_attn=self.flash_attn,
            verbose=False,
            **self.options,
        )
        self._made = (key, size)
        return self.llm

    def close(self) -> None:
        """Free the llama.cpp model and context (made again on the next use)."""
        if self.llm is not None:
            self.llm.close()
        self.llm, self._made = None, None

    def decoder(self) -> LlamaCppDecoder:
        """A decoder over an empty key/value cache (:mod:`ropekit.eval.tasks.decode`'s interface)."""
        return LlamaCppDecoder(self)

    def token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """1-D ids → ``(len(ids) - 1,)`` float64 losses of ``ids[1:]`` (float32 cross-entropy per position)."""
        decoder = self.decoder()
        decoder.reserve(len(ids))
        targets = ids[1:].to(torch.int64)
        losses = []
        for start in range(0, len(targets), N_BATCH):
            chunk = ids[start : min(start + N_BATCH, len(targets))]
            logits = decoder.extend(chunk, keep=len(chunk))  # (len(chunk), vocab) float32
            losses.append(F.cross_entropy(logits, targets[start : start + len(chunk)], reduction="none"))
        return torch.cat(losses).double()

    def predict_last(self, ids: torch.Tensor, count: int) -> torch.Tensor:
        """``(batch, seq)`` ids → ``(batch, count)`` greedy predictions at the last ``count`` positions."""
        rows = []
        for row in ids:
            rows.append(self.decoder().extend(row, keep=count).argmax(-1))
        return torch.stack(rows)

    def encode(self, text: bytes) -> torch.Tensor:
        if self.tokenizer is not None:
            from ropekit.eval.model_support import tokenizer_ids

            return tokenizer_ids(self.tokenizer, text)
        return torch.tensor(self.vocab.tokenize(text, add_bos=False, special=False), dtype=torch.int64)

    def detokenize(self, tokens: list[int]) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)
        return self.vocab.detokenize(tokens).decode("utf-8", errors="replace")

    def describe(self) -> dict[str, Any]:
        from ropekit.integrations.gguf.file import gguf_info

        return {
            "kind": "llamacpp",
            "engine": f"llama-cpp-python {getattr(self.llama_cpp, '__version__', '?')}",
            "name": self.name,
            "threads": self.threads,
            "flash_attn": self.flash_attn,
            "batch": self.batch,
            "rope": {"rotary_dim": self.rope.dim, "base": self.rope.base},
            "native_scaling": None if self.native_scaling is None else self.native_scaling.rope_type,
            "rope_options": dict(self.options),
            "tokenizer": "llama.cpp" if self.tokenizer is None else "transformers",
            "gguf": gguf_info(self.path),
        }


class LlamaCppDecoder:
    """llama.cpp's key/value cache as a decoder: ``extend`` feeds tokens, ``crop`` cuts the cache back.

    Logits are requested only for the positions ``extend`` returns (llama.cpp computes the output head for those
    alone), and read as float32.
    """

    def __init__(self, model: LlamaCppEvalModel) -> None:
        self.model = model
        self.llm: Any = None
        self.length = 0

    def reserve(self, tokens: int) -> None:
        """Before the first ``extend``: make the context hold ``tokens`` (the first ``extend`` reserves its own)."""
        self.llm = self.model.context(tokens)
        self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)  # one context serves the decoders made one after another

    def extend(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """Feed ``ids`` (1-D) after what the cache holds; return float32 logits ``(keep, vocab)`` of the last
        ``keep`` of them.

        Raises:
            ValueError: the context made for the first tokens is too short for what follows.
        """
        tokens = [int(t) for t in ids]
        if self.llm is None:
            self.reserve(len(tokens))
        if self.length + len(tokens) > self.llm.n_ctx():
            raise ValueError(
                f"llama.cpp's context holds {self.llm.n_ctx():,} tokens; this input needs "
                f"{self.length + len(tokens):,} (a question's answer budget beyond the margin)"
            )
        rows = []
        step = self.model.batch
        for start in range(0, len(tokens), step):
            chunk = tokens[start : start + step]
            first_kept = len(tokens) - keep - start  # index in the chunk of the first position whose logits are kept
            rows.append(self._decode(chunk, max(0, first_kept)))
        logits = np.concatenate(rows) if rows else np.zeros((0, self.model.vocab_size), np.float32)
        return torch.from_numpy(logits[len(logits) - keep :] if keep else logits[:0])

    def _decode(self, chunk: list[int], first_kept: int) -> np.ndarray:
        """One llama_decode of ``chunk`` at the current length; logits of ``chunk[first_kept:]`` (float32)."""
        batch = self.llm._batch
        batch.set_batch(batch=chunk, n_past=self.length, logits_all=False)
        for i in range(len(chunk)):  # set_batch asks for the last position's logits; ask for exactly these
            batch.batch.logits[i] = i >= first_kept
        outputs = max(0, len(chunk) - first_kept)
        if outputs == 0:
            batch.batch.logits[len(chunk) - 1] = True  # llama.cpp wants one output; it is dropped below
        self.llm._ctx.decode(batch)
        self.length += len(chunk)
        if outputs == 0:
            return np.zeros((0, self.model.vocab_size), np.float32)
        pointer = self.llm._ctx.get_logits()
        return np.ctypeslib.as_array(pointer, shape=(outputs, self.model.vocab_size)).copy()

    def crop(self, length: int) -> None:
        """Keep the first ``length`` cached tokens."""
        if self.llm is not None and length < self.length:
            self.llm._ctx.kv_cache_seq_rm(-1, length, -1)
            self.length = length
