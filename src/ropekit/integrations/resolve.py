"""One scaling from what a user asks for: a method's name, a factor, a target length, a new base or the planner
(:func:`resolve_scaling`), the rules every front end shares (``ropekit extend``/``finetune``/``engines``,
``ropekit.extend``, ``ropekit.patch``).

* ``factor`` is relative to the original (pre-training) length L0, also for a model whose config already extends it;
  without one, ``target_length / L0``. A factor and a target that disagree (L0 × factor rounds to another length)
  are refused, naming both; so is a target not above L0.
* Exactly one of a method, a new ``base`` or ``plan`` (``"base"`` with a ``base`` is the base change).
* ``plan``: the method ropekit's planner (:func:`ropekit.theory.plan`) picks for the target, and why:

  * with training (``finetune --plan``): Men et al.'s recipe (arXiv 2405.14591 §5) — keep the base when it already
    clears the base bound at the target length, else change it to the planner's suggested base (a round base
    verified feasible at every distance below the target);
  * training-free (``extend --plan``): the first of the methods with an ``extend_preference`` (YaRN, Llama 3, NTK,
    linear: best measured first, in docs/evaluation.md) whose frequencies keep B_m >= 0 for every m below the
    target; the most preferred when none does.

Errors are :class:`~ropekit.errors.InvalidArgument` naming this function's arguments (``method``, ``factor``,
``target_length``, ``base``, ``plan``, ``params``), which each front end writes as its own option or keyword.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument, Placeholder
from ropekit.scaling.registry import MissingParameters, ScalingConfig, get_scaling, ranked_scalings

__all__ = ["ResolvedScaling", "plan_scaling", "resolve_scaling", "training_free_choice"]

PLAIN = ("none", "default")


@dataclass(frozen=True)
class ResolvedScaling:
    """What :func:`resolve_scaling` gives: the scaling (``None``: plain RoPE at the model's base), the target length
    (``None``: the default, L0 × the factor) and the planner's sentence (``None`` without ``plan``)."""

    scaling: ScalingConfig | None
    target_length: int | None
    note: str | None = None


def resolve_scaling(
    method: str | None,
    *,
    rope: RopeConfig,
    original_length: int,
    factor: float | None = None,
    target_length: int | None = None,
    base: float | None = None,
    plan: bool = False,
    training: bool = False,
    params: Mapping[str, Any] | None = None,
) -> ResolvedScaling:
    """The scaling a user asks for on a model whose layers get ``rope`` and whose original length is
    ``original_length`` (the module docstring's rules).

    Args:
        method: a scaling's ``rope_type`` (``"none"``: plain RoPE), or ``None`` with ``base`` or ``plan``.
        factor: the scaling factor, relative to ``original_length``.
        target_length: the new context length (with ``factor``, they must agree; without, it gives the factor).
        base: a new RoPE base (the base change; ``method`` ``None`` or ``"base"``).
        plan: take the planner's method for ``target_length`` (``training``: Men et al.'s base rule).
        params: the method's other fields by name (``beta_fast``, ``short_factor``, ...); a field given here wins
            over ``factor``/``base`` of the same meaning. The model's own scaling fills what only a trained model
            has (LongRoPE's factor lists).

    Raises:
        InvalidArgument: about the argument at fault: not exactly one of ``method``/``base``/``plan``, an unknown
            method, ``factor`` and ``target_length`` that disagree, a target not above the original length, ``plan``
            without a target, parameters for plain RoPE, a value the method refuses.
        MissingParameters: the method needs fields none of the arguments give (``factor``: or ``target_length``).
    """
    name = None if method == "base" and base is not None else method
    if sum((bool(name), base is not None, bool(plan))) != 1:
        raise InvalidArgument(
            "method",
            method,
            message=lambda n: (
                f"give exactly one of {n('method', Placeholder('NAME'))}, {n('base', Placeholder('B'))} "
                f"or {n('plan', True)} (with {n('target_length')})"
            ),
        )
    extra = dict(params or {})
    factor = extra.pop("factor", factor)  # the method's own field wins, and is the one checked
    target = _checked_target(target_length, original_length, factor)
    if plan:
        if target is None:
            raise InvalidArgument(
                "target_length",
                None,
                message=lambda n: f"{n('plan', True)} needs {n('target_length')} (the length to plan for)",
            )
        return ResolvedScaling(*_planned(rope, original_length, target, training))
    if base is not None:
        from ropekit.scaling import BaseChange

        return ResolvedScaling(BaseChange(base=base), target)
    if name in PLAIN:
        if extra or factor is not None:
            given = sorted({*extra, *(["factor"] if factor is not None else [])})
            message = f"method {name!r} (plain RoPE) takes no parameters, got {given}"
            raise InvalidArgument("params" if extra else "factor", given, message=message, leads=False)
        return ResolvedScaling(None, target)
    return ResolvedScaling(_built(str(name), rope, original_length, factor, target, extra), target)


def _checked_target(target: int | None, original: int, factor: float | None) -> int | None:
    """``target`` once it is above ``original`` and agrees with ``factor`` (each relative to ``original``)."""
    from ropekit._validate import require_float, require_int

    if factor is not None:
        require_float("factor", factor, above=0.0)
    if target is None:
        return None
    target = require_int("target_length", target, minimum=1)
    if target <= original:
        message = lambda n: f"{n('target_length')} must be above the original length {original:,}, got {target:,}"  # noqa: E731
        raise InvalidArgument("target_length", target, message=message)
    means = math.floor(original * factor + 0.5) if factor is not None else target
    if means != target:
        raise InvalidArgument(
            "factor",
            factor,
            message=lambda n: (
                f"{n('factor', Placeholder(f'{factor:g}'))} and "
                f"{n('target_length', Placeholder(f'{target:,}'))} disagree: {n('factor')} is relative to the original "
                f"length {original:,}, so it means {means:,} tokens; give one of them"
            ),
        )
    return target


def _built(
    name: str, rope: RopeConfig, original: int, factor: float | None, target: int | None, params: dict[str, Any]
) -> ScalingConfig:
    """Method ``name`` built by its own ``from_options`` (the factor from the target where none is given)."""
    from ropekit.scaling import list_scalings

    try:
        config_class = get_scaling(name).config_class
    except (TypeError, ValueError):
        message = f"unknown rope_type {name!r}; one of {', '.join(['none', *list_scalings()])}"
        raise InvalidArgument("method", name, message=message, leads=False) from None
    if factor is None and target is not None:
        factor = target / original
    try:
        return config_class.from_options(factor=factor, original_length=original, native=rope.scaling, **params)
    except MissingParameters as error:
        if "factor" not in error.missing:
            raise
        raise MissingParameters(error.rope_type, error.missing, "give a factor or a target length") from None


def _planned(rope: RopeConfig, original: int, target: int, training: bool) -> tuple[ScalingConfig | None, int, str]:
    scaling, note = plan_scaling(rope, original, target, training=training)
    return scaling, target, note


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
