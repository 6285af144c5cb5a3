"""The method ``--plan`` picks from ropekit's planner (:func:`ropekit.theory.plan`), and why.

* With training (``finetune --plan``): Men et al.'s recipe (arXiv 2405.14591 §5) — keep the base when it already
  clears the base bound at the target length, else change it to the planner's suggested base (a round base verified
  feasible at every distance below the target).
* Training-free (``extend --plan``): the first of YaRN, Llama 3, NTK, linear (best measured first, in
  docs/evaluation.md) whose frequencies keep B_m >= 0 for every m below the target; YaRN when none does.
"""

from __future__ import annotations

from ropekit.config import RopeConfig
from ropekit.scaling.registry import ScalingConfig, get_scaling

#: training-free methods in order of preference
PREFERENCE = ("yarn", "llama3", "ntk", "linear")


def _build(name: str, factor: float, original: int) -> ScalingConfig:
    config_class = get_scaling(name).config_class
    if hasattr(config_class, "from_options"):
        return config_class.from_options(factor=factor, original_length=original)
    fields = config_class.__dataclass_fields__
    params: dict = {"factor": factor}
    if "original_max_position_embeddings" in fields:
        params["original_max_position_embeddings"] = original
    if name == "llama3":
        params.update(low_freq_factor=1.0, high_freq_factor=4.0)
    return config_class(**params)


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
    factor = target / original
    by_name = {m.name: m for m in result.methods}
    for name in PREFERENCE:
        if name in by_name and by_name[name].first_negative is None:
            return _build(name, factor, original), (
                f"plan: {name} at s = {factor:g}, the first of {', '.join(PREFERENCE)} whose frequencies keep "
                f"B_m >= 0 for every m < {target:,}"
            )
    return _build("yarn", factor, original), (
        f"plan: yarn at s = {factor:g}; none of {', '.join(PREFERENCE)} keeps B_m >= 0 below {target:,}, and YaRN "
        "measured best training-free"
    )
