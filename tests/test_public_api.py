"""The public surface, pinned: the names ``ropekit``, ``ropekit.theory`` and ``ropekit.scaling`` export, and that every
package says what it holds (a docstring naming each entry of its ``__all__``, each entry importable).

Oracle: the lists written out here. Adding or removing a public name is a decision; this test makes it a visible one.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "ropekit": [
        "Frequencies",
        "RopeConfig",
        "RotaryEmbedding",
        "__version__",
        "apply_rope",
        "apply_rope_qk",
        "cos_sin",
        "evaluate",
        "extend",
        "frequencies",
        "from_hf_config",
        "get_scaling",
        "inv_freq",
        "list_scalings",
        "make_scaling",
        "patch",
        "search",
    ],
    "ropekit.theory": [
        "PAPER_BOUND",
        "SU_BOUND",
        "BaseBound",
        "FaceValue",
        "MethodPlan",
        "Plan",
        "SimilarTokenCheck",
        "WavelengthReport",
        "base_bound",
        "critical_dimension",
        "crude_feasible_base",
        "extrapolation_limit",
        "face_value_check",
        "first_negative_m",
        "max_context_length",
        "ones_score",
        "pair_wavelengths",
        "periodic_pairs",
        "plan",
        "robust_base_only",
        "roformer_upper_bound",
        "similar_token_check",
        "similarity_margin",
        "similarity_sum",
        "smallest_feasible_base",
        "tolerance",
        "wavelength_report",
    ],
    "ropekit.scaling": [
        "SCALINGS",
        "BaseChange",
        "DefaultScaling",
        "DynamicScaling",
        "Frequencies",
        "LinearScaling",
        "Llama3Scaling",
        "LongRopeScaling",
        "MissingParameters",
        "NTKScaling",
        "ProportionalScaling",
        "ScalingConfig",
        "ScalingMethod",
        "YarnScaling",
        "frequencies",
        "get_scaling",
        "inv_freq",
        "list_scalings",
        "make_scaling",
        "ntk_base",
        "ranked_scalings",
        "register_scaling",
    ],
}

#: packages whose ``__all__`` names their modules (nothing heavy is imported by the package itself)
MODULE_PACKAGES = (
    "ropekit.cli",
    "ropekit.eval",
    "ropekit.eval.backends",
    "ropekit.experiments",
    "ropekit.finetune",
    "ropekit.integrations",
    "ropekit.integrations.gguf",
    "ropekit.integrations.hf",
    "ropekit.synthetic",
)


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_names_are_pinned_and_resolve(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_theory_plan_is_the_function_not_a_module():
    """``ropekit.theory.plan`` was both a module and the function that shadowed it; the module is ``planning``."""
    import ropekit.theory as theory
    from ropekit.theory.planning import plan

    assert theory.plan is plan and callable(theory.plan)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ropekit.theory.plan")


@pytest.mark.parametrize("package", MODULE_PACKAGES)
def test_packages_document_their_modules(package):
    module = importlib.import_module(package)
    assert module.__doc__ and module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        importlib.import_module(f"{package}.{name}")
        assert f".{name}`" in module.__doc__ or f"``{name}``" in module.__doc__ or name in module.__doc__, name


@pytest.mark.parametrize("package", ["ropekit.theory", "ropekit.scaling", "ropekit.model", "ropekit.attention"])
def test_packages_that_export_names_have_a_docstring(package):
    module = importlib.import_module(package)
    assert module.__doc__ and module.__all__
