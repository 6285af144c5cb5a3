"""ropekit's frequencies equal transformers' own ``ROPE_INIT_FUNCTIONS`` for every transformers rope type.

Oracle: transformers 5.18 itself. Each hypothesis example builds one config dict (the 5.x ``rope_parameters``
form or the 4.x ``rope_scaling`` form with the legacy ``type`` key), gives it to ``transformers.LlamaConfig``
and to :func:`ropekit.from_hf_config`, and compares ``inv_freq`` and ``attention_factor`` at 1e-6 relative.

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
import math
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import ropekit
from ropekit.scaling import Frequencies, frequencies

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.phi3 import modeling_phi3  # noqa: E402

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]  # tests/conftest.py

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


# ---------------------------------------------------------------------------------------------------------------
# Strategies. Each returns (config dict as in config.json, seq_len passed to the frequency function).

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


@st.composite
def default_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    max_len = draw(ORIGINAL_LENGTHS)
    return hf_config(draw, "default", {}, max_len=max_len), draw(seq_lens(max_len))


@st.composite
def linear_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    max_len = draw(ORIGINAL_LENGTHS)
    config = hf_config(draw, "linear", {"factor": draw(FACTORS)}, max_len=max_len)
    return config, draw(seq_lens(max_len))


@st.composite
def dynamic_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    max_len = draw(ORIGINAL_LENGTHS)  # dynamic's original length is max_position_embeddings
    config = hf_config(draw, "dynamic", {"factor": draw(FACTORS)}, max_len=max_len)
    return config, draw(seq_lens(max_len))


@st.composite
def yarn_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    original = draw(ORIGINAL_LENGTHS)
    factor = draw(FACTORS | st.none())
    max_len = int(original * (factor or draw(st.floats(1.0, 64.0))))
    params: dict[str, Any] = {"factor": factor}
    top: dict[str, Any] = {}
    where = draw(st.sampled_from(["params", "top", "absent"]))
    if where == "params":
        params["original_max_position_embeddings"] = original
    elif where == "top":
        top["original_max_position_embeddings"] = original
    else:
        max_len = original  # transformers then uses max_position_embeddings as the original length
    beta_fast = draw(st.sampled_from(["absent", None, 0]) | st.floats(1.0, 64.0))
    beta_slow = draw(st.sampled_from(["absent", None, 0]) | st.floats(0.01, 4.0))
    effective_fast = 32 if beta_fast in ("absent", None, 0) else beta_fast
    effective_slow = 1 if beta_slow in ("absent", None, 0) else beta_slow
    assume(effective_fast >= effective_slow)  # beta_fast < beta_slow raises: tests/scaling/test_validation.py
    for key, value in (("beta_fast", beta_fast), ("beta_slow", beta_slow)):
        if value != "absent":
            params[key] = value
    for key in ("mscale", "mscale_all_dim"):
        value = draw(st.sampled_from(["absent", None, 0.0, 1.0]) | st.floats(0.0, 2.0))
        if value != "absent":
            params[key] = value
    attention_factor = draw(st.sampled_from(["absent", None]) | st.floats(0.1, 4.0))
    if attention_factor != "absent":
        params["attention_factor"] = attention_factor
    truncate = draw(st.sampled_from(["absent", True, False, None]))
    if truncate != "absent":
        params["truncate"] = truncate
    config = hf_config(draw, "yarn", params, max_len=max_len, top=top)
    return config, draw(seq_lens(original))


@st.composite
def longrope_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    original = draw(ORIGINAL_LENGTHS)
    max_len = draw(st.integers(max(original // 4, 1), 64 * original))  # ratios below 1 too (factor then 1)
    config = hf_config(draw, "longrope", {}, max_len=max_len)
    rope = config.get("rope_parameters") or config["rope_scaling"]
    partial = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    pairs = int(head_dim * partial) // 2
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rope["short_factor"] = np.sort(rng.uniform(1.0, 4.0, pairs)).tolist()
    rope["long_factor"] = rng.uniform(0.5, 64.0, pairs).tolist()
    where = draw(st.sampled_from(["params", "top", "both"]))
    if where in ("params", "both"):
        rope["original_max_position_embeddings"] = original
    if where in ("top", "both"):  # Phi-3 keeps it at the top level, and there it wins
        config["original_max_position_embeddings"] = original
        if where == "both":
            rope["original_max_position_embeddings"] = 2 * original
    factor = draw(st.sampled_from(["absent", None]) | FACTORS)
    if factor != "absent":
        rope["factor"] = factor
    attention_factor = draw(st.sampled_from(["absent", None]) | st.floats(0.1, 4.0))
    if attention_factor != "absent":
        rope["attention_factor"] = attention_factor
    return config, draw(seq_lens(original))


@st.composite
def llama3_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    original = draw(ORIGINAL_LENGTHS)
    factor = draw(FACTORS)
    low = draw(st.floats(0.25, 8.0))
    high = low + draw(st.floats(0.01, 16.0))
    params = {
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": original,
    }
    config = hf_config(draw, "llama3", params, max_len=int(original * factor) + 1)
    return config, draw(seq_lens(original))


@st.composite
def proportional_cases(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    max_len = draw(ORIGINAL_LENGTHS)
    factor = draw(st.sampled_from(["absent"]) | FACTORS)
    params = {} if factor == "absent" else {"factor": factor}
    config = hf_config(draw, "proportional", params, max_len=max_len, proportional=True)
    return config, draw(seq_lens(max_len))


# ---------------------------------------------------------------------------------------------------------------


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


DEEPSEEK_V3 = {
    "head_dim": 64,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "max_position_embeddings": 163840,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "yarn",
        "factor": 40,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    },
}


def _yarn(**params: Any) -> dict[str, Any]:
    rope = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 8.0, "original_max_position_embeddings": 4096}
    return {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 32768,
            "rope_parameters": {**rope, **params}}  # fmt: skip


@EXAMPLES
@given(case=default_cases())
@example(case=({"head_dim": 80, "hidden_size": 2560, "num_attention_heads": 32, "max_position_embeddings": 2048,
                "partial_rotary_factor": 0.4, "rope_theta": 1e4}, None))  # fmt: skip
def test_default_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("default", *case)


@EXAMPLES
@given(case=linear_cases())
def test_linear_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("linear", *case)


@EXAMPLES
@given(case=dynamic_cases())
@example(case=({"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
                "rope_scaling": {"type": "dynamic", "factor": 2.0}}, 4096))  # fmt: skip
@example(case=({"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
                "rope_scaling": {"type": "dynamic", "factor": 2.0}}, 4097))  # fmt: skip
def test_dynamic_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("dynamic", *case)


@EXAMPLES
@given(case=yarn_cases())
@example(case=(DEEPSEEK_V3, None))
@example(case=(_yarn(beta_fast=0, beta_slow=0), None))  # 0 means the defaults 32 and 1
@example(case=(_yarn(mscale=0.707), None))  # mscale without mscale_all_dim is ignored
@example(case=(_yarn(mscale=1.0, mscale_all_dim=0.0), None))  # a zero counts as unset
@example(case=(_yarn(mscale=1.0, mscale_all_dim=0.5, attention_factor=1.25), None))  # explicit wins
@example(case=(_yarn(truncate=False), None))
@example(case=(_yarn(truncate=None), None))  # null disables truncation in transformers
@example(case=(_yarn(factor=None), None))  # null means max_position_embeddings / original = 8
def test_yarn_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("yarn", *case)


@EXAMPLES
@given(case=longrope_cases())
def test_longrope_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("longrope", *case)


@EXAMPLES
@given(case=llama3_cases())
@example(case=({"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
                "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}, None))  # fmt: skip
def test_llama3_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("llama3", *case)


@EXAMPLES
@given(case=proportional_cases())
def test_proportional_matches_transformers(case: tuple[dict[str, Any], int | None]) -> None:
    check_case("proportional", *case)


def test_every_transformers_rope_type_is_covered() -> None:
    """A rope type added to transformers must get an equivalence test here."""
    tested = {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"}
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} == tested
    assert tested <= set(ropekit.list_scalings())


def test_yarn_beta_zero_is_the_default_in_both() -> None:
    """transformers' ``beta_fast or 32``: an explicit 0 (or null) behaves exactly like the default."""
    zero = ropekit.from_hf_config(_yarn(beta_fast=0, beta_slow=None))
    assert (zero.scaling.beta_fast, zero.scaling.beta_slow) == (32.0, 1.0)
    hf_zero = transformers.LlamaConfig(**_yarn(beta_fast=0, beta_slow=None))
    hf_default = transformers.LlamaConfig(**_yarn())
    torch.testing.assert_close(ROPE_INIT_FUNCTIONS["yarn"](hf_zero)[0], ROPE_INIT_FUNCTIONS["yarn"](hf_default)[0])


def test_yarn_truncate_null_is_false_in_both() -> None:
    rope = ropekit.from_hf_config(_yarn(truncate=None))
    assert rope.scaling.truncate is False
    hf_null = ROPE_INIT_FUNCTIONS["yarn"](transformers.LlamaConfig(**_yarn(truncate=None)))[0]
    hf_false = ROPE_INIT_FUNCTIONS["yarn"](transformers.LlamaConfig(**_yarn(truncate=False)))[0]
    hf_true = ROPE_INIT_FUNCTIONS["yarn"](transformers.LlamaConfig(**_yarn(truncate=True)))[0]
    torch.testing.assert_close(hf_null, hf_false)
    assert not torch.allclose(hf_null, hf_true)


def test_longrope_ratio_below_one_gives_attention_factor_one() -> None:
    """transformers accepts max_position_embeddings < original (s < 1, A = 1); ropekit clamps s to 1."""
    config = {
        "head_dim": 64,
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "original_max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "longrope", "short_factor": [1.0] * 32, "long_factor": [4.0] * 32},
    }
    rope = ropekit.from_hf_config(config)
    assert rope.scaling.factor == 1.0
    _, attention = ROPE_INIT_FUNCTIONS["longrope"](transformers.LlamaConfig(**copy.deepcopy(config)))
    assert attention == frequencies(rope).attention_factor == 1.0


def test_float64_reevaluation_is_transformers_own_code() -> None:
    """The fallback oracle changes only the dtype: on an exactly representable case it equals float32."""
    hf = transformers.LlamaConfig(**_yarn())
    inv32, attention32 = ROPE_INIT_FUNCTIONS["yarn"](hf)
    with transformers_in_float64():
        inv64, attention64 = ROPE_INIT_FUNCTIONS["yarn"](hf)
    assert inv64.dtype == torch.float64 and attention64 == attention32
    assert relative_error(inv32.double().numpy(), inv64.numpy()).max() < 1e-6
    assert math.isclose(float(inv64[0]), 1.0)
