"""RoPE keys that only some architectures' transformers classes read, beyond the rules every model shares
(:mod:`ropekit.hf_format`); this module never imports transformers.

* ``rotary_dim`` (MiniMax-M2): a count of rotated dims; ``MiniMaxM2Config`` reads it as ``partial_rotary_factor`` =
  ``rotary_dim / head_dim`` where neither the rope dict nor the top level states ``partial_rotary_factor``.
* NTK-alpha (Hunyuan dense, Hunyuan MoE, Hunyuan-VL): ``{"rope_type": "dynamic", "alpha": a}``. transformers'
  ``HunYuan*RotaryEmbedding`` computes it in its modeling file, not in ``ROPE_INIT_FUNCTIONS``: plain RoPE at the base
  b·a^(d/(d−2)) with d the head size, up to ``max_position_embeddings`` (beyond it ``dynamic_rope_update`` recomputes
  from ``ROPE_INIT_FUNCTIONS["dynamic"]``, which reads no ``alpha``). ropekit reads it as plain RoPE at that base: what
  transformers computes at every length the model serves, the dict's other keys (``factor``, ``beta_fast``, ``mscale``,
  ...: the released configs carry them) unread as there; ``alpha`` elsewhere, or with partial rotary (the modeling
  file then rotates the whole head), is refused by name.
* ``short_mscale``/``long_mscale`` (Phi-3.5-MoE): ``PhimoeRotaryEmbedding`` multiplies cos and sin by
  ``long_mscale`` past ``original_max_position_embeddings`` and by ``short_mscale`` up to it, in place of the rope
  type's attention factor, for every rope type but ``default``; ``PhimoeConfig`` refuses such a dict without both as
  numbers. ropekit reads an equal pair as the method's ``attention_factor`` (Phi-3.5-MoE ships 1.2432 for both), refuses
  a pair that differs (one amplitude per method), and writes both as the written method's amplitude, with the
  original length the forward indexes. Other model types' classes do not read the pair: it is dropped there, as
  transformers drops it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: model types whose config class reads a top-level ``rotary_dim`` as the partial rotary factor (MiniMaxM2Config's
#: ``__post_init__``; MiniMax-M3-VL's text config declares a ``rotary_dim`` that its modeling file never reads: it
#: rotates ``rope_parameters``' ``partial_rotary_factor`` of the head, the whole head without one)
ROTARY_DIM_TYPES = frozenset({"minimax_m2"})
#: model types whose modeling file computes ``dynamic`` with ``alpha`` as NTK-alpha
NTK_ALPHA_TYPES = frozenset({"hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl"})
#: model types whose modeling file multiplies cos/sin by the rope dict's ``short_mscale``/``long_mscale``
MSCALE_PAIR_TYPES = frozenset({"phimoe"})
#: the pair's keys
MSCALE_PAIR = ("short_mscale", "long_mscale")
#: the keys of an NTK-alpha dict its modeling file reads (``factor``, ``beta_fast``, ``mscale``, ... it does not)
_READ_WITH_ALPHA = ("rope_theta", "partial_rotary_factor")


def rotary_dim_factor(top: Mapping[str, Any], head_dim: int) -> float | None:
    """``rotary_dim / head_dim`` where ``top``'s model type reads ``rotary_dim`` so, else ``None``."""
    dims = top.get("rotary_dim")
    if top.get("model_type") not in ROTARY_DIM_TYPES or dims is None:
        return None
    if not isinstance(dims, int) or isinstance(dims, bool) or not 2 <= dims <= head_dim or dims % 2:
        raise ValueError(f"rotary_dim must be an even number of dims in [2, head_dim={head_dim}], got {dims!r}")
    return dims / head_dim


def ntk_alpha_base(
    params: dict[str, Any], top: Mapping[str, Any], base: float, head_dim: int, dim: int
) -> float | None:
    """The base b·a^(d/(d−2)) of an NTK-alpha rope dict (``alpha`` removed from ``params``), ``None`` for any other.

    Raises:
        ValueError: ``alpha`` on a model type whose modeling file does not read it, with a rope type other than
            ``dynamic``, with partial rotary, or not a number above 0.
    """
    if "alpha" not in params:
        return None
    alpha = params.pop("alpha")
    model_type = top.get("model_type")
    kind = params.get("rope_type", params.get("type"))
    if model_type not in NTK_ALPHA_TYPES or kind != "dynamic":
        raise ValueError(
            f"alpha (NTK-alpha) is read by the modeling files of {sorted(NTK_ALPHA_TYPES)} with rope_type 'dynamic' "
            f"only, got model_type {model_type!r} with rope_type {kind!r}"
        )
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not alpha > 0:
        raise ValueError(f"alpha (NTK-alpha) must be a number above 0, got {alpha!r}")
    if dim != head_dim:
        raise ValueError(
            f"NTK-alpha with partial rotary ({dim} of {head_dim} dims): {model_type}'s modeling file rotates the "
            "whole head, ignoring partial_rotary_factor; refused"
        )
    for key in [key for key in params if key not in _READ_WITH_ALPHA]:  # the modeling file reads none of them
        params.pop(key)
    params["rope_type"] = "default"
    return base * alpha ** (head_dim / (head_dim - 2))


def mscale_pair_factor(params: dict[str, Any], top: Mapping[str, Any], fields: set[str], where: str) -> None:
    """Take ``short_mscale``/``long_mscale`` out of ``params`` (in place). On a :data:`MSCALE_PAIR_TYPES` model with a
    rope type other than ``default``, the pair's one value is the amplitude transformers applies: the method's
    ``attention_factor`` where it has one (``fields``: its config's fields), else it must be 1; and the original length
    its rotary indexes is dropped where the method does not take one. Elsewhere the pair is dropped, as transformers
    drops it.

    Raises:
        ValueError: the pair differs, is not two numbers, disagrees with a stated ``attention_factor``, or is not 1 on
            a method without an amplitude (``where``: the dict and its rope type).
    """
    pair = {key: params.pop(key) for key in MSCALE_PAIR if key in params}
    kind = params.get("rope_type", params.get("type", "default"))
    if not pair or top.get("model_type") not in MSCALE_PAIR_TYPES or kind == "default":
        return
    values = set(pair.values())
    if len(pair) != 2 or len(values) != 1 or not all(isinstance(v, (int, float)) for v in values):
        raise ValueError(
            f"short_mscale and long_mscale must be two equal numbers (the amplitude of cos/sin below and past the "
            f"original length; ropekit keeps one per method), got {pair}"
        )
    (value,) = values
    if params.get("attention_factor") not in (None, value):
        raise ValueError(f"attention_factor {params['attention_factor']!r} and short/long_mscale {value!r} disagree")
    if "original_max_position_embeddings" not in fields:
        params.pop("original_max_position_embeddings", None)  # the rotary's own, which e.g. linear does not read
    if "attention_factor" in fields:
        params["attention_factor"] = float(value)
    elif not math.isclose(value, 1.0, rel_tol=1e-9):
        raise ValueError(
            f"{where}: short_mscale/long_mscale {value!r} on a method whose cos/sin ropekit does not scale (yarn and "
            "longrope take an amplitude); refused"
        )


def with_mscale_pair(written: dict[str, Any], model_type: Any, amplitude: float, original: int) -> dict[str, Any]:
    """``written`` (a rope dict) as a :data:`MSCALE_PAIR_TYPES` model's class reads it: for a rope type other than
    ``default``, ``short_mscale`` = ``long_mscale`` = ``amplitude`` and ``original_max_position_embeddings``; else
    ``written`` itself."""
    if model_type not in MSCALE_PAIR_TYPES or written.get("rope_type", "default") == "default":
        return written
    return {"original_max_position_embeddings": original, **written, **dict.fromkeys(MSCALE_PAIR, amplitude)}
