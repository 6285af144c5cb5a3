"""ropekit's frequencies equal transformers' own ``ROPE_INIT_FUNCTIONS`` for every transformers rope type.

Oracle: transformers itself, at 1e-6 relative, with float32 artefacts judged against the same transformers
function re-run in float64 (:mod:`helpers.hf_frequencies`). Each hypothesis example builds one config dict (the
5.x ``rope_parameters`` form or the 4.x ``rope_scaling`` form) and gives it to transformers and to ropekit. YaRN,
whose reading rules have the most quirks, is in test_equivalence_hf_yarn.py.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ropekit
from ropekit.scaling import frequencies

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from helpers.hf_frequencies import EXAMPLES, FACTORS, ORIGINAL_LENGTHS, check_case, hf_config, seq_lens  # noqa: E402

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]  # tests/conftest.py


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
