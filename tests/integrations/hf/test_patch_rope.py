"""ropekit inside transformers models: logits with ropekit's rotary adapter equal transformers' own.

Oracle: transformers itself. Each case builds a small random model from a config in code (nothing is
downloaded), takes its logits through transformers' own ``rope_parameters`` path, then replaces its rotary
embedding with ``apply_scaling(model, from_hf_config(model.config).scaling)`` and compares at 1e-5. To show
that each comparison has teeth, the logits with plain RoPE must differ from the scaled ones by far more than
the tolerance (except where the method is a no-op at that length, which is then checked instead).

Methods transformers lacks are compared with a transformers model that expresses the same frequencies another
way: static NTK as ``default`` with the NTK base, frozen dynamic NTK as ``default`` with the base of its fixed
length, and YaRN's paper ramp as a model whose ``inv_freq`` buffer holds the paper's eq. 18 computed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from helpers.hf_logits import (
    ATOL,
    BASE,
    COMMON,
    HEAD_DIM,
    MATTERS,
    YARN_32_TO_128,
    gpt2,
    ids_of,
    llama,
    logits,
    max_diff,
    phi3,
)
from helpers.hf_models import random_hf_model
from ropekit import from_hf_config
from ropekit.integrations.hf.patch_rope import HFRotaryAdapter, apply_scaling
from ropekit.scaling import DynamicScaling, LinearScaling, NTKScaling, YarnScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


CASES: list = [
    # (id, model factory, sequence length, whether the scaling changes anything at that length)
    pytest.param(lambda: llama({"rope_type": "default", "rope_theta": BASE}), 80, False, id="llama-default"),
    pytest.param(lambda: llama({"rope_type": "default", "rope_theta": 500.0}), 80, False, id="llama-default-base500"),
    pytest.param(
        lambda: llama({"rope_type": "linear", "rope_theta": BASE, "factor": 4.0}), 80, True, id="llama-linear"
    ),
    pytest.param(
        lambda: llama({"rope_type": "dynamic", "rope_theta": BASE, "factor": 2.0}), 150, True, id="llama-dynamic-long"
    ),
    pytest.param(
        lambda: llama({"rope_type": "dynamic", "rope_theta": BASE, "factor": 2.0}), 40, False, id="llama-dynamic-short"
    ),
    pytest.param(lambda: llama(YARN_32_TO_128, 128), 150, True, id="llama-yarn"),
    pytest.param(
        lambda: llama(YARN_32_TO_128 | {"beta_fast": 8.0, "beta_slow": 2.0, "truncate": False}, 128),
        150,
        True,
        id="llama-yarn-betas-no-truncate",
    ),
    pytest.param(
        lambda: llama(YARN_32_TO_128 | {"mscale": 1.0, "mscale_all_dim": 0.5}, 128), 150, True, id="llama-yarn-mscale"
    ),
    pytest.param(
        lambda: llama(YARN_32_TO_128 | {"mscale": 0.707, "mscale_all_dim": 0.707}, 128),
        150,
        True,
        id="llama-yarn-mscale-equal",
    ),
    pytest.param(
        lambda: llama(YARN_32_TO_128 | {"attention_factor": 1.3}, 128), 150, True, id="llama-yarn-attention-factor"
    ),
    pytest.param(
        lambda: llama(
            {
                "rope_type": "llama3",
                "rope_theta": BASE,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            },
            256,
        ),
        150,
        True,
        id="llama-llama3",
    ),
    pytest.param(lambda: phi3(), 40, True, id="phi3-longrope-short"),
    pytest.param(lambda: phi3(), 64, True, id="phi3-longrope-at-original"),
    pytest.param(lambda: phi3(), 150, True, id="phi3-longrope-long"),
    pytest.param(lambda: phi3(partial=0.5), 150, True, id="phi3-longrope-partial"),
    pytest.param(lambda: gpt_neox(), 80, False, id="gptneox-partial"),
    pytest.param(
        lambda: gpt_neox({"rope_type": "linear", "rope_theta": BASE, "factor": 2.0}, rotary_pct=0.5),
        80,
        True,
        id="gptneox-partial-linear",
    ),
    pytest.param(lambda: other("qwen2"), 80, False, id="qwen2-default"),
    pytest.param(lambda: other("mistral"), 80, False, id="mistral-default"),
    pytest.param(lambda: other("gemma"), 80, False, id="gemma-default"),
]


def gpt_neox(rope_parameters: dict | None = None, rotary_pct: float = 0.25):
    options = {key: value for key, value in COMMON.items() if key != "pad_token_id"}
    if rope_parameters is not None:
        options["rope_parameters"] = rope_parameters
    return random_hf_model("gpt_neox", positions=64, rotary_pct=rotary_pct, **options).eval()


def other(arch: str):
    extra = {"head_dim": HEAD_DIM, "kv_heads": 1} if arch == "gemma" else {}
    return random_hf_model(arch, positions=64, **COMMON, **extra).eval()


@pytest.mark.parametrize(("factory", "length", "matters"), CASES)
def test_ropekit_adapter_equals_transformers(factory: Callable, length: int, matters: bool) -> None:
    model = factory()
    ids = ids_of(length)
    reference = logits(model, ids)  # transformers' own rope_parameters path
    rope = from_hf_config(model.config)
    apply_scaling(model, rope.scaling)
    adapters = [m for m in model.modules() if isinstance(m, HFRotaryAdapter)]
    assert len(adapters) == 1 and adapters[0].rope == rope
    assert max_diff(logits(model, ids), reference) < ATOL
    apply_scaling(model, None)
    plain = logits(model, ids)
    if matters:
        assert max_diff(plain, reference) > MATTERS
    else:
        assert max_diff(plain, reference) < ATOL


def test_a_fixed_attention_factor_is_kept_by_the_same_method() -> None:
    """A YaRN model whose attention_factor (1.0) is not YaRN's 0.1·ln s + 1 keeps it under a new YaRN factor, as
    extend writes it: the logits are transformers' own YaRN x8 model with attention_factor 1.0."""
    ids = ids_of(150)
    ours = llama(YARN_32_TO_128 | {"attention_factor": 1.0}, 256)
    theirs = logits(llama(YARN_32_TO_128 | {"factor": 8.0, "attention_factor": 1.0}, 256), ids)
    apply_scaling(ours, YarnScaling(factor=8.0, original_max_position_embeddings=32))
    assert max_diff(logits(ours, ids), theirs) < ATOL
    assert ours.config.rope_parameters["attention_factor"] == 1.0  # what save_pretrained writes
    formula = llama(YARN_32_TO_128 | {"factor": 8.0}, 256)  # A = 0.1·ln 8 + 1: the comparison has teeth
    assert max_diff(logits(formula, ids), theirs) > MATTERS


def test_partial_rotary_is_read_from_the_config() -> None:
    assert from_hf_config(gpt_neox().config).dim == 4
    assert from_hf_config(gpt_neox(rotary_pct=0.5).config).dim == 8
    assert from_hf_config(phi3(partial=0.5).config).dim == 8


def test_dynamic_adapter_follows_length_changes_like_transformers() -> None:
    """Long, then short, then long again: transformers' module keeps state; ropekit's must match at each call."""
    theirs = llama({"rope_type": "dynamic", "rope_theta": BASE, "factor": 2.0})
    ours = llama({"rope_type": "dynamic", "rope_theta": BASE, "factor": 2.0})
    apply_scaling(ours, from_hf_config(ours.config).scaling)
    for length in (150, 40, 64, 200, 30):
        ids = ids_of(length)
        assert max_diff(logits(ours, ids), logits(theirs, ids)) < ATOL, length


def test_static_ntk_equals_default_with_the_ntk_base() -> None:
    factor = 4.0
    ntk_base = BASE * factor ** (HEAD_DIM / (HEAD_DIM - 2))  # bloc97: b' = b·s^(d/(d−2))
    oracle = llama({"rope_type": "default", "rope_theta": ntk_base})
    model = llama({"rope_type": "default", "rope_theta": BASE})
    ids = ids_of(150)
    plain = logits(model, ids)
    apply_scaling(model, NTKScaling(factor=factor))
    expected = logits(oracle, ids)
    assert max_diff(logits(model, ids), expected) < ATOL
    assert max_diff(plain, expected) > MATTERS


def test_frozen_dynamic_equals_default_with_the_base_of_its_fixed_length() -> None:
    """fixed_seq_len=N: the dynamic base for n = N at every length, even below the original length."""
    factor, original, fixed = 2.0, 64, 256
    base = BASE * (factor * fixed / original - (factor - 1)) ** (HEAD_DIM / (HEAD_DIM - 2))
    oracle = llama({"rope_type": "default", "rope_theta": base})
    transformers_dynamic = llama({"rope_type": "dynamic", "rope_theta": BASE, "factor": factor})
    model = llama({"rope_type": "default", "rope_theta": BASE})
    apply_scaling(model, DynamicScaling(factor=factor, original_max_position_embeddings=original, fixed_seq_len=fixed))
    ids = ids_of(40)
    assert max_diff(logits(model, ids), logits(oracle, ids)) < ATOL
    # transformers' dynamic NTK is a no-op below the original length; the frozen one is not
    assert max_diff(logits(transformers_dynamic, ids), logits(oracle, ids)) > MATTERS


def paper_yarn_inv_freq(factor: float, original: int, alpha: float = 1.0, beta: float = 32.0) -> torch.Tensor:
    """YaRN (arXiv 2309.00071) eq. 18: r_i = L/λ_i, γ = clip((r − α)/(β − α), 0, 1), h(θ) = (1 − γ)θ/s + γθ."""
    theta = [BASE ** (-2 * i / HEAD_DIM) for i in range(HEAD_DIM // 2)]
    out = []
    for t in theta:
        r = original * t / (2 * math.pi)
        gamma = min(1.0, max(0.0, (r - alpha) / (beta - alpha)))
        out.append((1 - gamma) * t / factor + gamma * t)
    return torch.tensor(out, dtype=torch.float32)


def test_yarn_paper_ramp_equals_eq_18_and_differs_from_transformers_ramp() -> None:
    factor, original = 4.0, 32
    oracle = llama({"rope_type": "default", "rope_theta": BASE}, 128)
    oracle.model.rotary_emb.inv_freq = paper_yarn_inv_freq(factor, original)
    oracle.model.rotary_emb.attention_scaling = 0.1 * math.log(factor) + 1.0  # eq. 22: √(1/t) = 0.1 ln s + 1
    transformers_yarn = llama(YARN_32_TO_128, 128)
    model = llama({"rope_type": "default", "rope_theta": BASE}, 128)
    apply_scaling(model, YarnScaling(factor=factor, original_max_position_embeddings=original, ramp="paper"))
    ids = ids_of(150)
    expected = logits(oracle, ids)
    assert max_diff(logits(model, ids), expected) < ATOL
    assert max_diff(logits(transformers_yarn, ids), expected) > MATTERS


def test_reapplying_replaces_the_adapter_instead_of_nesting() -> None:
    model = llama({"rope_type": "default", "rope_theta": BASE})
    ids = ids_of(80)
    reference = logits(model, ids)
    for factor in (2.0, 4.0, 1.0):
        apply_scaling(model, LinearScaling(factor=factor))
        assert sum(isinstance(m, HFRotaryAdapter) for m in model.modules()) == 1
    assert max_diff(logits(model, ids), reference) < ATOL  # linear with s = 1 is plain RoPE


def test_non_rope_models_are_refused_by_name() -> None:
    model = gpt2()
    with pytest.raises(ValueError, match="not a RoPE model"):
        apply_scaling(model, None)


def test_a_rope_config_without_a_rotary_module_is_refused() -> None:
    class Headless(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = llama({"rope_type": "default", "rope_theta": BASE}).config
            self.proj = torch.nn.Linear(4, 4)

    with pytest.raises(ValueError, match="RotaryEmbedding"):
        apply_scaling(Headless(), None)
