"""The method ``--plan`` picks from ropekit's planner (:func:`ropekit.theory.plan`), and why.

* With training (``finetune --plan``): Men et al.'s recipe (arXiv 2405.14591 §5) — keep the base when it already
  clears the base bound at the target length, else change it to the planner's suggested base (a round base verified
  feasible at every distance below the target).
* Training-free (``extend --plan``): the first of the methods with an ``extend_preference`` (YaRN, Llama 3, NTK,
  linear: best measured first, in docs/evaluation.md) whose frequencies keep B_m >= 0 for every m below the target;
  the most preferred when none does.
"""

from __future__ import annotations

from ropekit.config import RopeConfig
from ropekit.scaling.registry import ScalingConfig, get_scaling, ranked_scalings


def _build(name: str, factor: float, original: int) -> ScalingConfig:
    return get_scaling(name).config_class.from_options(factor=factor, original_length=original)


def plan_scaling(rope: RopeConfig, original: int, target: int, *, training: bool) -> tuple[ScalingConfig | None, str]:
    """``(scaling, sentence saying which and why)`` from the planner for ``rope`` extended ``original → target``.

    Raises:
        ValueError: the planner refuses the arguments (e.g. a target below the original length).
    """
    from ropekit.scaling import BaseChange
    from ropekit.theory import plan

    result = plan(rope.head_dim, rope.base, original, target, rotary_dim=rope.rotary_dim, robust=False)
    if training:
        if result.clears_bound:
            return None, (
                f"plan: base {rope.base:g} already clears the base bound for {target:,} tokens; training at the "
                "target length with the base unchanged (Men et al.)"
            )
        return BaseChange(base=float(result.suggested_base)), (
            f"plan: base {rope.base:g} is below the bound for {target:,} tokens (B_m < 0 at m = "
            f"{result.first_negative:,}); base change to {result.suggested_base:,.0f}, the planner's round base "
            "verified feasible at every m (Men et al.)"
        )
    name, why = training_free_choice(result)
    return _build(name, target / original, original), why


def training_free_choice(result) -> tuple[str, str]:
    """``(method name, sentence saying why)``: the training-free method ``extend --plan`` takes from a
    :class:`~ropekit.theory.planning.Plan` (the module docstring's rule)."""
    factor, target = result.factor, result.target_length
    by_name = {m.name: m for m in result.methods}
    preference = ranked_scalings("extend_preference")  # training-free methods, best measured first
    for name in preference:
        if name in by_name and by_name[name].first_negative is None:
            return name, (
                f"plan: {name} at s = {factor:g}, the first of {', '.join(preference)} whose frequencies keep "
                f"B_m >= 0 for every m < {target:,}"
            )
    return preference[0], (
        f"plan: {preference[0]} at s = {factor:g}; none of {', '.join(preference)} keeps B_m >= 0 below {target:,}, "
        f"and {preference[0]} measured best training-free"
    )
