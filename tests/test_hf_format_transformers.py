"""Round trip ``from_hf_config(to_hf_dict(cfg)) == cfg``, transformers accepting ``to_hf_dict`` output without
warnings, and reading real-world config.json shapes (5.x and 4.x)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropekit import RopeConfig, frequencies, from_hf_config
from ropekit.hf_format import to_hf_dict
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    ScalingConfig,
    YarnScaling,
)

ROUND_TRIP = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

BASES = st.floats(2.0, 7.0).map(lambda exponent: 10.0**exponent)
FACTORS = st.floats(1.0, 64.0) | st.integers(1, 64)
ORIGINAL_LENGTHS = st.integers(128, 131072)
OPTIONAL_POSITIVE = st.none() | st.floats(0.1, 4.0)


@st.composite
def scalings(draw: st.DrawFn, pairs: int) -> ScalingConfig | None:
    """A transformers-expressible scaling for a rope with ``pairs`` rotating pairs."""
    original = draw(ORIGINAL_LENGTHS)
    kind = draw(st.sampled_from(["default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"]))
    if kind == "default":
        return None
    if kind == "linear":
        return LinearScaling(factor=draw(FACTORS))
    if kind == "dynamic":
        return DynamicScaling(factor=draw(FACTORS), original_max_position_embeddings=original)
    if kind == "proportional":
        return ProportionalScaling(factor=draw(st.just(1.0) | FACTORS))
    if kind == "yarn":
        beta_slow = draw(st.floats(0.01, 4.0))
        return YarnScaling(
            factor=draw(FACTORS),
            original_max_position_embeddings=original,
            beta_fast=beta_slow + draw(st.floats(0.0, 60.0)),
            beta_slow=beta_slow,
            mscale=draw(st.none() | st.floats(0.0, 2.0)),
            mscale_all_dim=draw(st.none() | st.floats(0.0, 2.0)),
            attention_factor=draw(OPTIONAL_POSITIVE),
            truncate=draw(st.booleans()),
        )
    if kind == "longrope":
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return LongRopeScaling(
            short_factor=rng.uniform(1.0, 4.0, pairs).tolist(),
            long_factor=rng.uniform(0.5, 64.0, pairs).tolist(),
            original_max_position_embeddings=original,
            factor=draw(FACTORS),
            attention_factor=draw(OPTIONAL_POSITIVE),
        )
    low = draw(st.floats(0.25, 8.0))
    return Llama3Scaling(
        factor=draw(FACTORS),
        original_max_position_embeddings=original,
        low_freq_factor=low,
        high_freq_factor=low + draw(st.floats(0.01, 16.0)),
    )


@st.composite
def hf_expressible(draw: st.DrawFn) -> RopeConfig:
    head_dim = 2 * draw(st.integers(16, 128))
    # a full rotary dim is written as None: an HF dict cannot tell rotary_dim=head_dim from None
    rotary_dim = draw(st.none() | st.integers(2, head_dim // 2 - 1).map(lambda pairs: 2 * pairs))
    scaling = draw(scalings((rotary_dim or head_dim) // 2))
    return RopeConfig(head_dim, base=draw(BASES), rotary_dim=rotary_dim, scaling=scaling)


def model_dict(rope: RopeConfig, rope_parameters: dict[str, Any]) -> dict[str, Any]:
    """A config.json around ``rope_parameters`` whose lengths transformers' validation is happy with."""
    scaling = rope.scaling
    max_len = 4096
    if isinstance(scaling, DynamicScaling | YarnScaling):
        # dynamic: its original length is max_position_embeddings; yarn: a ratio of 1 is never checked
        max_len = scaling.original_max_position_embeddings
    elif isinstance(scaling, Llama3Scaling | LongRopeScaling):
        max_len = math.ceil(scaling.original_max_position_embeddings * scaling.factor) + 1
    heads = 4
    return {
        "head_dim": rope.head_dim,
        "hidden_size": heads * rope.head_dim,
        "num_attention_heads": heads,
        "max_position_embeddings": max_len,
        "rope_parameters": rope_parameters,
    }


@ROUND_TRIP
@given(rope=hf_expressible())
def test_round_trip(rope: RopeConfig) -> None:
    exported = to_hf_dict(rope)
    assert exported["rope_type"] == rope.rope_type
    assert from_hf_config(model_dict(rope, exported)) == rope


@pytest.fixture(scope="module")
def transformers_warnings() -> Iterator[list[str]]:
    """What transformers logs at WARNING or above; :func:`accepted_by_transformers` empties it per config."""
    transformers = pytest.importorskip("transformers")
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("transformers")
    handler = Collect(logging.WARNING)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        transformers.logging.set_verbosity(verbosity)


def accepted_by_transformers(config: dict[str, Any], records: list[str]) -> Any:
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.warning_once.cache_clear()  # or a repeated message would be swallowed
    records.clear()
    return transformers.LlamaConfig(**copy.deepcopy(config))


@pytest.mark.hf
@ROUND_TRIP
@given(rope=hf_expressible())
def test_transformers_accepts_to_hf_dict_without_warnings(rope: RopeConfig, transformers_warnings: list[str]) -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = model_dict(rope, to_hf_dict(rope))
    proportional_factor = isinstance(rope.scaling, ProportionalScaling) and rope.scaling.factor != 1
    hf = accepted_by_transformers(config, transformers_warnings)
    if proportional_factor:  # transformers quirk: it reads `factor` but its validation does not list it
        assert transformers_warnings == [
            "Unrecognized keys in `rope_parameters` for 'rope_type'='proportional': {'factor'}"
        ]
    else:
        assert transformers_warnings == []
    assert from_hf_config(hf) == rope
    if rope.rope_type != "default":
        inv, attention = ROPE_INIT_FUNCTIONS[rope.rope_type](hf, device="cpu")
        ours = frequencies(rope)
        assert len(inv) == len(ours.inv_freq)
        assert attention == pytest.approx(ours.attention_factor, rel=1e-12)


@pytest.mark.hf
@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(110, 56), (98, 58), (196, 6), (256, 2)])
def test_partial_rotary_factor_survives_transformers_truncation(
    head_dim: int, rotary_dim: int, transformers_warnings: list[str]
) -> None:
    """rotary_dim/head_dim in float truncates to rotary_dim − 1 for these (56/110·110 = 55.99…); the exported
    factor is nudged up by an ulp so that transformers and ropekit read back exactly ``rotary_dim``."""
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    for proportional in (False, True):
        scaling = ProportionalScaling() if proportional else None
        rope = RopeConfig(head_dim, rotary_dim=rotary_dim, scaling=scaling)
        exported = to_hf_dict(rope)
        partial = exported["partial_rotary_factor"]
        hf = accepted_by_transformers(model_dict(rope, exported), transformers_warnings)
        assert transformers_warnings == []
        assert from_hf_config(hf) == rope
        if proportional:
            assert 2 * int(partial * head_dim // 2) == rotary_dim
        else:
            assert int(head_dim * partial) == rotary_dim
            inv, _ = Phi3RotaryEmbedding.compute_default_rope_parameters(hf)
            np.testing.assert_allclose(inv.double().numpy(), frequencies(rope).inv_freq, rtol=1e-6)


@pytest.mark.parametrize(
    ("scaling", "rope_type"),
    [(NTKScaling(factor=4.0), "default"), (BaseChange(base=5e5), "default")],
)
def test_methods_transformers_lacks_export_as_an_equivalent_default(scaling: ScalingConfig, rope_type: str) -> None:
    rope = RopeConfig(128, rotary_dim=64, scaling=scaling)
    exported = to_hf_dict(rope)
    assert exported["rope_type"] == rope_type
    back = from_hf_config(model_dict(rope, exported))
    assert back.scaling is None
    np.testing.assert_allclose(frequencies(back).inv_freq, frequencies(rope).inv_freq, rtol=1e-14)


@pytest.mark.parametrize(
    "scaling",
    [
        DynamicScaling(factor=2.0, original_max_position_embeddings=4096, fixed_seq_len=16384),
        LongRopeScaling(
            short_factor=[1.0] * 64, long_factor=[2.0] * 64, original_max_position_embeddings=4096, fixed_seq_len=8192
        ),
        YarnScaling(factor=4.0, original_max_position_embeddings=4096, ramp="paper"),
    ],
)
def test_ropekit_only_options_refuse_to_export(scaling: ScalingConfig) -> None:
    with pytest.raises(ValueError, match="ropekit-only option"):
        to_hf_dict(RopeConfig(128, scaling=scaling))


def test_to_hf_dict_writes_plain_floats() -> None:
    rope = RopeConfig(128, scaling=YarnScaling(factor=4, original_max_position_embeddings=4096, attention_factor=1))
    exported = to_hf_dict(rope)
    assert type(exported["factor"]) is float and type(exported["attention_factor"]) is float
    assert type(exported["original_max_position_embeddings"]) is int


LLAMA_3_1 = RopeConfig(
    128,
    base=500000.0,
    scaling=Llama3Scaling(factor=8.0, original_max_position_embeddings=8192, low_freq_factor=1.0, high_freq_factor=4.0),
)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (  # Llama 3.1 8B config.json as saved by transformers 4.x
            {
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "max_position_embeddings": 131072,
                "rope_theta": 500000.0,
                "rope_scaling": {
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
            },
            LLAMA_3_1,
        ),
        (  # the same in the 5.x form
            {
                "head_dim": 128,
                "max_position_embeddings": 131072,
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                },
            },
            LLAMA_3_1,
        ),
        (  # GPT-NeoX: rotary_pct at the top level
            {"hidden_size": 2048, "num_attention_heads": 16, "rotary_pct": 0.25, "rotary_emb_base": 1e5},
            RopeConfig(128, base=1e5, rotary_dim=32),
        ),
        (  # Phi-3 with the legacy 4.x type "su": original length at the top level wins over the rope dict's
            {
                "hidden_size": 3072,
                "num_attention_heads": 32,
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {
                    "type": "su",
                    "short_factor": [1.0] * 48,
                    "long_factor": [2.0] * 48,
                    "original_max_position_embeddings": 2048,
                },
            },
            RopeConfig(
                96,
                scaling=LongRopeScaling(
                    short_factor=[1.0] * 48, long_factor=[2.0] * 48, original_max_position_embeddings=4096, factor=32.0
                ),
            ),
        ),
        (  # rope_scaling wins over rope_parameters when both are present (transformers: `rope_scaling or ...`)
            {
                "head_dim": 64,
                "rope_scaling": {"type": "linear", "factor": 2.0},
                "rope_parameters": {"rope_type": "linear", "factor": 4.0},
            },
            RopeConfig(64, scaling=LinearScaling(factor=2.0)),
        ),
        (  # dynamic ignores an original length in its rope dict: max_position_embeddings is the original length
            {
                "head_dim": 64,
                "max_position_embeddings": 2048,
                "rope_scaling": {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 1024},
            },
            RopeConfig(64, scaling=DynamicScaling(factor=2.0, original_max_position_embeddings=2048)),
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:config has both rope_scaling and rope_parameters")  # see test_hf_format
def test_reads_real_world_shapes(config: dict[str, Any], expected: RopeConfig) -> None:
    assert from_hf_config(config) == expected


@pytest.mark.hf
def test_reads_transformers_config_objects() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=4096,
        num_attention_heads=32,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    )
    assert from_hf_config(config) == LLAMA_3_1
    assert from_hf_config(config, interleaved=True) == LLAMA_3_1.replace(interleaved=True)


@pytest.mark.hf
def test_the_warning_oracle_sees_transformers_warnings(transformers_warnings: list[str]) -> None:
    """The capture works: an unknown key in rope_parameters is reported."""
    config = {"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "bogus": 1}}
    accepted_by_transformers(config, transformers_warnings)
    assert any("Unrecognized keys" in message and "bogus" in message for message in transformers_warnings)


@pytest.mark.hf
@pytest.mark.parametrize("model_type", ["dbrx", "gptj", "codegen"])
def test_reads_the_head_size_under_the_names_the_config_class_maps(model_type: str) -> None:
    """DBRX's config.json names the sizes d_model/n_heads, GPT-J's and CodeGen's n_embd/n_head (transformers maps them
    to hidden_size/num_attention_heads): the head size is the one transformers' config object gives."""
    transformers = pytest.importorskip("transformers")
    config = transformers.CONFIG_MAPPING[model_type](rope_parameters={"rope_type": "default", "rope_theta": 1e4})
    saved = config.to_dict()
    assert "hidden_size" not in saved and "num_attention_heads" not in saved  # the file has the class's own names
    assert from_hf_config(saved).head_dim == config.hidden_size // config.num_attention_heads
