"""A model patched with ``apply_scaling`` saves what it computes: ``save_pretrained`` writes a config that
transformers alone loads to the same logits, or refuses a RoPE no transformers config expresses.

Oracle: transformers itself, reloading the saved folder without ropekit (logits at 1e-5).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers.hf_logits import ATOL, BASE, MATTERS, gemma3, ids_of, llama, logits, max_diff, phi3
from ropekit.integrations.hf.patch_rope import HFRotaryAdapter, apply_scaling
from ropekit.scaling import DynamicScaling, LinearScaling, NTKScaling, YarnScaling

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


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
    """Paper-ramp YaRN on Gemma 3 needs a per-layer-type longrope, which transformers cannot run: saving is
    refused (nothing written) instead of writing plain RoPE; a later expressible scaling can be saved again."""
    model = gemma3()
    apply_scaling(model, YarnScaling(factor=4.0, original_max_position_embeddings=32, ramp="paper"))
    with pytest.raises(ValueError, match=r"save_pretrained.*no transformers config expresses"):
        model.save_pretrained(tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    apply_scaling(model, LinearScaling(factor=2.0))
    model.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "config.json").is_file()
