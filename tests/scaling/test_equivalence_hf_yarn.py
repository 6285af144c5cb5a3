"""YaRN's frequencies and attention factor equal transformers' own, quirks included: null and zero betas, mscale
with and without mscale_all_dim, an explicit attention factor, truncate, a null factor, DeepSeek-V3's config.

Oracle: transformers itself (:mod:`helpers.hf_frequencies`: 1e-6 relative, float32 artefacts judged against
the same function re-run in float64), and that float64 re-run checked against float32 where both are exact.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

import ropekit

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from helpers.hf_frequencies import (  # noqa: E402
    EXAMPLES,
    FACTORS,
    ORIGINAL_LENGTHS,
    check_case,
    hf_config,
    relative_error,
    seq_lens,
    transformers_in_float64,
)

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]  # tests/conftest.py


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


def test_float64_reevaluation_is_transformers_own_code() -> None:
    """The fallback oracle changes only the dtype: on an exactly representable case it equals float32."""
    hf = transformers.LlamaConfig(**_yarn())
    inv32, attention32 = ROPE_INIT_FUNCTIONS["yarn"](hf)
    with transformers_in_float64():
        inv64, attention64 = ROPE_INIT_FUNCTIONS["yarn"](hf)
    assert inv64.dtype == torch.float64 and attention64 == attention32
    assert relative_error(inv32.double().numpy(), inv64.numpy()).max() < 1e-6
    assert math.isclose(float(inv64[0]), 1.0)
