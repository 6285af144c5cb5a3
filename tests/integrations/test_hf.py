"""ropekit inside transformers models: logits with ropekit's rotary adapter equal transformers' own.

Oracle: transformers 5.18 itself. Each case builds a small random model from a config in code (nothing is
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
from pathlib import Path

import pytest
import torch

from helpers.hf_models import random_hf_model
from ropekit import from_hf_config
from ropekit.config import RopeConfig
from ropekit.integrations.hf import HFRotaryAdapter, apply_scaling
from ropekit.scaling import DynamicScaling, LinearScaling, NTKScaling, YarnScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

#: transformers forms angles in float32 and ropekit in float64; at these sizes that moves logits by ~1e-6
ATOL = 1e-5
#: plain RoPE must move the logits by at least this much for a comparison at ATOL to mean anything
MATTERS = 1e-2
VOCAB = 300
BASE = 10000.0
HEAD_DIM = 16
#: above transformers' default 0.02 so attention is far from uniform and positions move the logits (by 0.06 to
#: 0.4 here); not much above, or logits grow and the float32 angle error with them.
INIT = 0.05


#: every model's config beyond the factory's sizes (2 layers, 4 heads and 2 KV heads of 16, vocabulary VOCAB)
COMMON = {"initializer_range": INIT, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def llama(rope_parameters: dict, max_position_embeddings: int = 64, **extra):
    return random_hf_model(
        "llama", positions=max_position_embeddings, rope_parameters=rope_parameters, **COMMON, **extra
    ).eval()


def phi3(partial: float = 1.0):
    pairs = int(HEAD_DIM * partial) // 2
    rope = {
        "rope_type": "longrope",
        "rope_theta": BASE,
        "partial_rotary_factor": partial,
        "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
        "long_factor": [1.0 + 1.5 * i for i in range(pairs)],
    }
    return random_hf_model(
        "phi3", positions=256, original_max_position_embeddings=64, rope_parameters=rope, **COMMON
    ).eval()


def gpt_neox(rope_parameters: dict | None = None, rotary_pct: float = 0.25):
    options = {key: value for key, value in COMMON.items() if key != "pad_token_id"}
    if rope_parameters is not None:
        options["rope_parameters"] = rope_parameters
    return random_hf_model("gpt_neox", positions=64, rotary_pct=rotary_pct, **options).eval()


def other(arch: str):
    extra = {"head_dim": HEAD_DIM, "kv_heads": 1} if arch == "gemma" else {}
    return random_hf_model(arch, positions=64, **COMMON, **extra).eval()


def gpt2():
    """A model without RoPE."""
    return random_hf_model("gpt2", vocab=VOCAB, hidden=32, layers=1, heads=2, positions=64)


def ids_of(length: int, batch: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(length)
    return torch.randint(3, VOCAB, (batch, length), generator=generator)


@torch.no_grad()
def logits(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids).logits.double()


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


YARN_32_TO_128 = {"rope_type": "yarn", "rope_theta": BASE, "factor": 4.0, "original_max_position_embeddings": 32}

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


# ---- HFEvalModel on save_pretrained directories --------------------------------------------------------------


@pytest.fixture(scope="module")
def yarn_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hf") / "llama-yarn"
    llama(YARN_32_TO_128, 128).save_pretrained(path)
    return path


def test_eval_model_reads_the_saved_directory(yarn_dir: Path) -> None:
    from ropekit.eval.models import HFEvalModel, load_eval_model

    model = load_eval_model(yarn_dir)
    assert isinstance(model, HFEvalModel)
    assert model.train_length == 32  # YaRN's original length, not max_position_embeddings
    assert model.native_scaling == YarnScaling(factor=4.0, original_max_position_embeddings=32)
    assert model.rope == RopeConfig(HEAD_DIM, base=BASE)
    description = model.describe()
    assert description["architecture"] == "LlamaForCausalLM"
    assert description["native_scaling"] == "yarn" and description["tokenizer"] == "bytes"
    assert description["rope"] == {"head_dim": HEAD_DIM, "rotary_dim": HEAD_DIM, "base": BASE}
    assert model.encode(b"Az\xff").tolist() == [65, 122, 255]  # no tokenizer: byte ids


def test_eval_model_logits_match_transformers_for_native_and_plain(yarn_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from ropekit.eval.models import HFEvalModel

    model = HFEvalModel(yarn_dir)
    native = AutoModelForCausalLM.from_pretrained(yarn_dir, local_files_only=True).eval()
    plain = llama({"rope_type": "default", "rope_theta": BASE}, 128)
    plain.load_state_dict(native.state_dict())
    ids = ids_of(150, batch=1)
    model.set_scaling(model.native_scaling)
    assert model.logits(ids).dtype == torch.float32
    assert max_diff(model.logits(ids).double(), logits(native, ids)) < ATOL
    model.set_scaling(None)
    assert max_diff(model.logits(ids).double(), logits(plain, ids)) < ATOL


def test_device_map_auto_loads_through_accelerate(yarn_dir: Path) -> None:
    pytest.importorskip("accelerate")
    from ropekit.eval.models import HFEvalModel

    mapped, direct = HFEvalModel(yarn_dir, device_map="auto"), HFEvalModel(yarn_dir)
    ids = ids_of(64, batch=1)
    assert max_diff(mapped.logits(ids).double(), direct.logits(ids).double()) < ATOL


def test_non_rope_directory_is_refused(tmp_path: Path) -> None:
    from ropekit.eval.models import HFEvalModel

    gpt2().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="GPT2LMHeadModel is not a RoPE model"):
        HFEvalModel(tmp_path)


def test_missing_directory_and_missing_config_are_file_errors(tmp_path: Path) -> None:
    from ropekit.eval.models import HFEvalModel, load_eval_model

    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_eval_model(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        HFEvalModel(tmp_path)


def test_small_vocabulary_without_tokenizer_cannot_take_bytes(tmp_path: Path) -> None:
    from ropekit.eval.models import HFEvalModel

    llama({"rope_type": "default", "rope_theta": BASE}, vocab_size=100).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no tokenizer"):
        HFEvalModel(tmp_path).encode(b"hello")


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried"),
        MemoryError(),
    ],
)
def test_out_of_memory_becomes_a_clear_error(yarn_dir: Path, monkeypatch, error: BaseException) -> None:
    from ropekit.eval.models import HFEvalModel

    model = HFEvalModel(yarn_dir)

    def forward(*args, **kwargs):
        raise error

    monkeypatch.setattr(model.model.base_model, "forward", forward)
    with pytest.raises(ValueError, match=r"out of memory at sequence length 77 \(batch 2\)") as caught:
        model.logits(ids_of(77))
    assert caught.value.__cause__ is error


def test_other_runtime_errors_pass_through(yarn_dir: Path, monkeypatch) -> None:
    from ropekit.eval.models import HFEvalModel

    model = HFEvalModel(yarn_dir)

    def forward(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(model.model.base_model, "forward", forward)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        model.logits(ids_of(8))


# ---- one RoPE per layer type (Gemma 3) ---------------------------------------------------------------------------

GEMMA3_BASES = {"full_attention": 1e6, "sliding_attention": 1e4}


def gemma3(full: dict | None = None, sliding: dict | None = None):
    """A small random Gemma 3 (layers: sliding, full) whose rope_parameters are keyed by layer type."""
    rope = {
        "full_attention": {"rope_type": "default", "rope_theta": GEMMA3_BASES["full_attention"]} | (full or {}),
        "sliding_attention": {"rope_type": "default", "rope_theta": GEMMA3_BASES["sliding_attention"]}
        | (sliding or {}),
    }
    return random_hf_model(
        "gemma3",
        head_dim=HEAD_DIM,
        positions=128,
        sliding_window=32,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters=rope,
        **COMMON,
    ).eval()


GEMMA3_CASES = [
    pytest.param({"rope_type": "linear", "factor": 4.0}, None, LinearScaling(factor=4.0), id="linear-full"),
    pytest.param(
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
        None,
        YarnScaling(factor=4.0, original_max_position_embeddings=32),
        id="yarn-full",
    ),
    pytest.param(
        None,
        {"rope_type": "linear", "factor": 2.0},
        LinearScaling(factor=2.0),
        id="linear-sliding",
    ),
]


@pytest.mark.parametrize(("full", "sliding", "scaling"), GEMMA3_CASES)
def test_per_layer_type_scaling_equals_transformers(full, sliding, scaling) -> None:
    """transformers applies a Gemma 3 config's scaling to the layer types that carry it, each at its own base."""
    reference_model = gemma3(full, sliding)
    ids = ids_of(100)
    reference = logits(reference_model, ids)
    model = gemma3()
    model.load_state_dict(reference_model.state_dict())
    plain = logits(model, ids)
    types = ("full_attention",) if full else ("sliding_attention",)
    apply_scaling(model, scaling, layer_types=None if full else types)
    assert model.ropekit_scaled_layer_types == list(types)
    assert max_diff(logits(model, ids), reference) < ATOL
    assert max_diff(plain, reference) > MATTERS


def test_per_layer_type_rope_is_read_per_type_and_unscaled_types_keep_their_own() -> None:
    from ropekit.integrations.hf_config import layer_types_of, rope_of

    model = gemma3()
    assert layer_types_of(model) == ["full_attention", "sliding_attention"]
    assert rope_of(model) == RopeConfig(HEAD_DIM, base=1e6)  # default: the full-attention layers
    assert rope_of(model, "sliding_attention") == RopeConfig(HEAD_DIM, base=1e4)
    ids = ids_of(60)
    reference = logits(model, ids)
    apply_scaling(model, None)  # plain RoPE on full layers, own RoPE on sliding ones: the model itself
    assert max_diff(logits(model, ids), reference) < ATOL


def test_layer_types_are_checked() -> None:
    with pytest.raises(ValueError, match=r"layer_types must name some of \['full_attention', 'sliding_attention'\]"):
        apply_scaling(gemma3(), LinearScaling(factor=2.0), layer_types=("global",))
    with pytest.raises(ValueError, match="one RoPE for all layers"):
        apply_scaling(llama({"rope_type": "default", "rope_theta": BASE}), None, layer_types=("full_attention",))


def test_eval_model_reports_the_scaled_layer_types(tmp_path: Path) -> None:
    from ropekit.eval.models import HFEvalModel

    gemma3().save_pretrained(tmp_path)
    model = HFEvalModel(tmp_path)
    assert model.rope == RopeConfig(HEAD_DIM, base=1e6)
    model.set_scaling(LinearScaling(factor=2.0))
    description = model.describe()
    assert description["layer_types"] == ["full_attention", "sliding_attention"]
    assert description["scaled_layer_types"] == ["full_attention"]
    assert description["dtype"] == "float32" and description["attention"] == "sdpa"


# ---- a patched model saves what it computes-----------------------------------------------------

SAVED_CASES = [
    pytest.param(lambda: llama({"rope_type": "default", "rope_theta": BASE}), LinearScaling(factor=4.0), id="linear"),
    pytest.param(
        lambda: llama({"rope_type": "default", "rope_theta": BASE}),
        YarnScaling(factor=4.0, original_max_position_embeddings=64, ramp="paper"),
        id="yarn-paper-as-longrope",
    ),
    pytest.param(lambda: llama({"rope_type": "default", "rope_theta": BASE}), NTKScaling(factor=4.0), id="ntk"),
    pytest.param(
        lambda: llama({"rope_type": "default", "rope_theta": BASE}),
        DynamicScaling(factor=2.0, original_max_position_embeddings=64),
        id="dynamic",
    ),
    pytest.param(lambda: phi3(), None, id="phi3-to-plain"),
    pytest.param(lambda: gemma3(), LinearScaling(factor=4.0), id="gemma3-linear-full"),
]


@pytest.mark.parametrize(("factory", "scaling"), SAVED_CASES)
def test_save_pretrained_of_a_patched_model_reloads_with_the_same_logits(factory, scaling, tmp_path: Path) -> None:
    """``apply_scaling`` → ``save_pretrained`` → transformers alone loads the same model (logits to 1e-5), after an
    earlier scaling too (every call starts from the config as loaded)."""
    model = factory()
    ids = ids_of(150)
    plain = logits(model, ids)
    apply_scaling(model, NTKScaling(factor=8.0))  # a different scaling first: the last one counts
    apply_scaling(model, scaling)
    ours = logits(model, ids)
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path, dtype=torch.float32).eval()
    assert not any(isinstance(m, HFRotaryAdapter) for m in reloaded.modules())  # transformers' own RoPE
    assert max_diff(logits(reloaded, ids), ours) < ATOL
    assert max_diff(plain, ours) > MATTERS


def test_save_pretrained_refuses_a_rope_without_native_form(tmp_path: Path) -> None:
    """Paper-ramp YaRN on Gemma 3 needs a per-layer-type longrope, which transformers 5.18 cannot run: saving is
    refused (nothing written) instead of writing plain RoPE; a later expressible scaling can be saved again."""
    model = gemma3()
    apply_scaling(model, YarnScaling(factor=4.0, original_max_position_embeddings=32, ramp="paper"))
    with pytest.raises(ValueError, match=r"save_pretrained.*no transformers config expresses"):
        model.save_pretrained(tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    apply_scaling(model, LinearScaling(factor=2.0))
    model.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "config.json").is_file()
