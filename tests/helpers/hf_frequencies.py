"""The oracle of the frequency-equivalence tests (tests/scaling/test_equivalence_hf*.py): transformers' own
``ROPE_INIT_FUNCTIONS``, and the hypothesis strategies that build the configs.

Each example builds one config dict (the 5.x ``rope_parameters`` form or the 4.x ``rope_scaling`` form with the
legacy ``type`` key), gives it to ``transformers.LlamaConfig`` and to :func:`ropekit.from_hf_config`, and compares
``inv_freq`` and ``attention_factor`` at 1e-6 relative (:func:`check_case`).

transformers computes ``inv_freq`` in float32, ropekit in float64. Where transformers' own float32 rounding
exceeds the tolerance (llama3's smooth blend cancels near the band edge and multiplies the error by up to s;
rarely yarn), the entries off by more than 1e-6 are accepted only if (a) re-running the very same transformers
function with float32 replaced by float64 moves those entries by more than half the tolerance, and (b) ropekit
equals that float64 re-evaluation to 1e-12. The float64 re-evaluation swaps the ``torch`` name seen by the
transformers module for a proxy whose ``float``/``float32`` are ``float64``; nothing else changes.
"""

from __future__ import annotations

import contextlib
import copy
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.phi3 import modeling_phi3

import ropekit
from ropekit.scaling import Frequencies, frequencies

RTOL = 1e-6
EXAMPLES = settings(
    max_examples=250,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class _Float64Torch(types.ModuleType):
    """``torch`` with ``float``/``float32`` meaning ``float64``, for re-running transformers' code exactly."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str) -> Any:
        return torch.float64 if name in ("float", "float32") else getattr(torch, name)


@contextlib.contextmanager
def transformers_in_float64() -> Iterator[None]:
    modules = (transformers.modeling_rope_utils, modeling_phi3)
    saved = [module.torch for module in modules]
    for module in modules:
        module.torch = _Float64Torch()
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.torch = original


def relative_error(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    scale = np.where(expected == 0, 1.0, np.abs(expected))
    return np.abs(actual - expected) / scale


def assert_matches_transformers(ours: Frequencies, evaluate: Callable[[], tuple[torch.Tensor, float]]) -> None:
    """``ours`` equals transformers' result to 1e-6 relative (see the module docstring for float32 artefacts)."""
    inv32, attention32 = evaluate()
    assert inv32.dtype == torch.float32
    expected = inv32.double().numpy()
    assert ours.inv_freq.dtype == np.float64
    assert ours.inv_freq.shape == expected.shape
    assert ours.attention_factor == pytest.approx(float(attention32), rel=1e-12)
    off = relative_error(ours.inv_freq, expected) > RTOL
    if off.any():
        with transformers_in_float64():
            inv64, attention64 = evaluate()
        assert inv64.dtype == torch.float64
        exact = inv64.numpy()
        artefact = relative_error(expected, exact) > RTOL / 2
        assert artefact[off].all(), f"pairs {np.flatnonzero(off & ~artefact)} differ beyond float32 rounding"
        assert relative_error(ours.inv_freq, exact)[off].max() <= 1e-12
        assert ours.attention_factor == pytest.approx(float(attention64), rel=1e-12)


BASES = st.floats(2.0, 7.0).map(lambda exponent: 10.0**exponent) | st.sampled_from([1e2, 1e4, 5e5, 1e6, 1e7])


FACTORS = st.just(1.0) | st.floats(1.0, 64.0) | st.integers(1, 64)


ORIGINAL_LENGTHS = st.sampled_from([2048, 4096, 8192, 32768]) | st.integers(128, 131072)


@st.composite
def head_and_partial(draw: st.DrawFn, *, proportional: bool = False) -> tuple[int, float]:
    """head_dim in 32…256 (even) and a partial rotary factor whose truncated rotary dim is even (>= 4)."""
    head_dim = 2 * draw(st.integers(16, 128))
    if proportional:
        partial = draw(st.just(1.0) | st.floats(2 / head_dim, 1.0))
        assume(int(partial * head_dim // 2) >= 1)
        return head_dim, partial
    partial = draw(
        st.just(1.0)
        | st.sampled_from([0.25, 0.5, 0.75])
        | st.integers(2, head_dim // 2 - 1).map(lambda pairs: 2 * pairs / head_dim)
    )
    rotary_dim = int(head_dim * partial)
    assume(rotary_dim % 2 == 0 and rotary_dim >= 4)  # odd truncations raise: tests/scaling/test_validation.py
    return head_dim, partial


def seq_lens(original: int) -> st.SearchStrategy[int | None]:
    """None (construction time), below, exactly at, just above, and far above ``original``."""
    return (
        st.none()
        | st.integers(1, max(original - 1, 1))
        | st.sampled_from([original, original + 1])
        | st.integers(original + 1, 64 * original)
    )


def hf_config(
    draw: st.DrawFn,
    rope_type: str,
    params: dict[str, Any],
    *,
    max_len: int,
    proportional: bool = False,
    top: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A config.json dict in the 5.x form or the 4.x form (``rope_scaling``, legacy ``type``, top-level theta)."""
    head_dim, partial = draw(head_and_partial(proportional=proportional))
    heads = draw(st.integers(1, 8))
    config: dict[str, Any] = {
        "hidden_size": head_dim * heads,
        "num_attention_heads": heads,
        "max_position_embeddings": max_len,
        **(top or {}),
    }
    if draw(st.booleans()):
        config["head_dim"] = head_dim
    base = draw(BASES)
    form = draw(st.sampled_from(["5.x", "4.x type", "4.x rope_type"]))
    if form == "5.x":
        params = {"rope_type": rope_type, "rope_theta": base, **params}
        if partial != 1.0 or proportional:
            params["partial_rotary_factor"] = partial
        config["rope_parameters"] = params
    else:
        key = "type" if form == "4.x type" else "rope_type"
        config["rope_scaling"] = {key: rope_type, **params}
        config["rope_theta"] = base
        if partial != 1.0:
            config["partial_rotary_factor"] = partial
    return config


def check_case(rope_type: str, config: dict[str, Any], seq_len: int | None) -> None:
    """Build both sides from the same dict and compare."""
    hf = transformers.LlamaConfig(**copy.deepcopy(config))
    if rope_type == "default":
        # LlamaRotaryEmbedding's default ignores partial_rotary_factor; Phi-3's (like GPT-NeoX's) applies it.
        def evaluate() -> tuple[torch.Tensor, float]:
            return modeling_phi3.Phi3RotaryEmbedding.compute_default_rope_parameters(hf)
    else:

        def evaluate() -> tuple[torch.Tensor, float]:
            return ROPE_INIT_FUNCTIONS[rope_type](hf, device="cpu", seq_len=seq_len)

    rope = ropekit.from_hf_config(config)
    assert rope.rope_type == rope_type
    assert_matches_transformers(frequencies(rope, seq_len), evaluate)
    # the config object transformers built reads back to the same ropekit config
    assert ropekit.from_hf_config(hf) == rope
