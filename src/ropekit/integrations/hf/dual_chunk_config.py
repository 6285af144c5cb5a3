"""Qwen's ``dual_chunk_attention_config`` (Qwen2.5-7B/14B-Instruct-1M, Qwen3-2507) and ropekit's ``dual_chunk``
method: the one place that maps each to the other.

What vLLM runs for that key (``DualChunkRotaryEmbedding`` in ``vllm/model_executor/layers/rotary_embedding/
dual_chunk_rope.py``, and its ``DUAL_CHUNK_FLASH_ATTN`` backend; SGLang's backend is a port of it), with
``chunk_len = chunk_size − local_size``:

- keys at ``j mod chunk_len``; intra-chunk queries at ``i mod chunk_len``;
- successive-chunk queries at ``min(chunk_len + i mod chunk_len, chunk_size)``;
- inter-chunk queries at the successive table's last entry, ``min(2·chunk_len − 1, chunk_size)``.

ropekit's :class:`~ropekit.attention.dual_chunk.DualChunk` with chunk ``s`` and window ``w`` clamps at
``s + w − 1`` (the paper's ``c − 1``), one below vLLM's ``chunk_size``. So the same positions are

    ``s = chunk_size − local_size``, ``w = local_size + 1``  ⇔  ``chunk_size = s + w − 1``, ``local_size = w − 1``,

exact while ``w <= s``. A ``local_size`` of ``chunk_len`` or more never clamps the successive queries and puts the
inter-chunk ones at ``2·chunk_len − 1``: that is ropekit's ``w = s``, so reading converts to it. Writing a ``w``
above ``s`` is refused (ropekit's inter-chunk queries sit at ``s + w − 1``, beyond any position vLLM uses).

What ropekit does not run: with ``original_max_position_embeddings > 0`` vLLM multiplies the logits by a
length-dependent temperature ``max(1, 0.1·ln(L / original) + 1)`` (``L`` the sequence length; applied to the keys,
and in prefill to the softmax scale as well), and a ``sparse_attention_config`` switches prefill to MInference-style
sparse attention. ropekit's method has neither: reading notes them, and writing sets
``original_max_position_embeddings`` to 0 (vLLM's "off") and no sparse config. Pure integer arithmetic; no
precision concerns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: ropekit.attention loads torch, which reading a config does not need
    from ropekit.attention.dual_chunk import DualChunk

__all__ = ["CONFIG_KEY", "dual_chunk_config", "dual_chunk_from_config", "refuse_beside_a_scaling"]

#: the config.json key vLLM and SGLang read
CONFIG_KEY = "dual_chunk_attention_config"


def dual_chunk_config(method: DualChunk) -> dict[str, int]:
    """The ``dual_chunk_attention_config`` under which vLLM/SGLang use exactly ``method``'s positions.

    Raises:
        ValueError: ``local_window`` above ``chunk_size`` (vLLM's inter-chunk queries cannot sit that far).
    """
    from ropekit.attention.dual_chunk import DualChunk

    if not isinstance(method, DualChunk):
        raise TypeError(f"method must be a DualChunk attention config, got {method!r:.60}")
    s, w = method.chunk_size, method.local_window
    if w > s:
        raise ValueError(
            f"local_window must be <= chunk_size ({s}) to write a dual_chunk_attention_config, got {w}: vLLM puts "
            f"inter-chunk queries at most at 2*chunk_size-1 = {2 * s - 1}, ropekit at chunk_size+local_window-1"
        )
    return {"chunk_size": s + w - 1, "local_size": w - 1, "original_max_position_embeddings": 0}


def refuse_beside_a_scaling(config: Mapping[str, Any]) -> None:
    """Refuse a ``config.json`` that carries both a ``dual_chunk_attention_config`` and a RoPE scaling.

    With that key, vLLM's and SGLang's model classes build ``DualChunkRotaryEmbedding`` from the base alone and drop
    the rope dict (``ropekit engines`` reports it as "cannot express"), while transformers ignores the key and runs
    the scaling: the same folder would be two models. A base change (written as ``rope_type`` ``default`` with its
    ``rope_theta``) is what both run.

    Raises:
        InvalidArgument: about ``extra_config``: the key beside a ``rope_type`` other than ``default`` (any layer
            type's, on a per-layer-type model).
    """
    from ropekit.errors import InvalidArgument

    if not config.get(CONFIG_KEY):
        return
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    dicts = [p for p in params.values() if isinstance(p, Mapping)] if isinstance(params, Mapping) else []
    kinds = {str(d.get("rope_type", d.get("type", "default"))) for d in (dicts or [params])}
    scaled = sorted(kind for kind in kinds if kind != "default")
    if scaled:
        message = (
            f"a {CONFIG_KEY} beside rope_type {scaled[0]!r}: vLLM and SGLang build dual-chunk attention's rotary "
            f"(DualChunkRotaryEmbedding) from the base alone, so they would run plain RoPE where transformers runs "
            f"{scaled[0]}; write it over plain RoPE or a base change, or the scaling without it"
        )
        raise InvalidArgument("extra_config", config[CONFIG_KEY], message=message, leads=False)


def _count(config: Mapping[str, Any], key: str, minimum: int) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{CONFIG_KEY}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def dual_chunk_from_config(config: Mapping[str, Any]) -> tuple[DualChunk, list[str]]:
    """``(method, notes)``: ropekit's :class:`~ropekit.attention.dual_chunk.DualChunk` with the positions of a ``dual_chunk_attention_config``
    (the dict itself, or a whole ``config.json`` holding it), and what vLLM runs with it that ropekit does not.

    Raises:
        ValueError: no such config, or a value out of range (chunk_size must exceed local_size >= 0).
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"{CONFIG_KEY} must be a JSON object, got {config!r:.60}")
    if CONFIG_KEY in config:
        return dual_chunk_from_config(config[CONFIG_KEY])
    if "chunk_size" not in config:
        raise ValueError(f"{CONFIG_KEY} needs chunk_size and local_size, got keys {sorted(config)}")
    local = _count(config, "local_size", 0)
    size = _count(config, "chunk_size", local + 1)
    chunk = size - local
    notes = []
    if local + 1 > chunk:
        notes.append(
            f"local_size {local} >= chunk_size - local_size {chunk}: successive-chunk queries never clamp, so it "
            f"reads as local_window = chunk_size = {chunk}"
        )
    original = config.get("original_max_position_embeddings") or 0
    if original:
        notes.append(
            f"vLLM multiplies the logits by max(1, 0.1*ln(L/{original}) + 1) at length L; ropekit's dual_chunk "
            "does not (compose a scaling with an attention factor if needed)"
        )
    if config.get("sparse_attention_config") and config.get("sparse_attention_enabled", True):
        notes.append("sparse_attention_config: vLLM prefills with sparse attention; ropekit attends densely")
    from ropekit.attention.dual_chunk import DualChunk

    return DualChunk(chunk_size=chunk, local_window=min(local + 1, chunk)), notes
