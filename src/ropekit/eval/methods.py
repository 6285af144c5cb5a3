"""Which scaling (and which attention method) each evaluated method gets at a given length.

A method name is a RoPE scaling (``none``, ``native`` or a ``rope_type``), a training-free attention method of
:mod:`ropekit.attention` (``self_extend``: plain RoPE plus Self-Extend), or both joined by ``+``
(``yarn+self_extend``: the attention method on top of the scaling).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ropekit.attention.registry import AttentionConfig, get_attention, list_attentions
from ropekit.errors import ArgumentType, InvalidArgument, UnknownParameters
from ropekit.eval.searched import NAME as SEARCHED
from ropekit.eval.searched import PARAM as SEARCHED_PARAM
from ropekit.eval.searched import searched_scaling
from ropekit.scaling.registry import MissingParameters, ScalingConfig, get_scaling, list_scalings, ranked_scalings

if TYPE_CHECKING:
    from ropekit.config import RopeConfig
    from ropekit.eval.protocol import EvalModel

#: the attention methods evaluated by default (after the scalings): Self-Extend, the family's most cited member, which
#: needs no parameters beyond the training length (its group follows the length by the authors' rule)
DEFAULT_ATTENTIONS = ("self_extend",)


def default_methods() -> tuple[str, ...]:
    """What ``--methods`` means by default: plain RoPE, every registered scaling with an ``eval_order``, and
    :data:`DEFAULT_ATTENTIONS`."""
    return ("none", *ranked_scalings("eval_order"), *DEFAULT_ATTENTIONS)


def factor_for(length: int, train_length: int, factor: float | str) -> float:
    """``auto``: s = length / train_length (at least 1); otherwise the given number."""
    if factor == "auto":
        return max(1.0, length / train_length)
    return float(factor)


def scaling_for(
    method: str,
    *,
    factor: float,
    train_length: int,
    native: ScalingConfig | None = None,
    extra: dict[str, Any] | None = None,
    rope: RopeConfig | None = None,
) -> ScalingConfig | None:
    """The scaling config for ``method`` at ``factor`` (clamped to at least 1).

    ``none`` is plain RoPE; ``native`` the model's own scaling; ``searched`` the factors of the search.json that
    ``extra["factors"]`` names (:mod:`ropekit.eval.searched`). Every other method is built by its own
    :meth:`~ropekit.scaling.base.ScalingConfig.from_options` from the factor, the training length as the
    original length, the model's own scaling and ``extra``. A method with a required parameter that these do not
    give (``longrope``'s searched factors on a model without them, ``base`` without ``extra={"base": ...}``)
    raises ``LookupError`` so callers can skip it.

    Raises:
        LookupError: the method needs parameters that cannot be derived here.
        ValueError: the method is unknown or a parameter is out of range.
    """
    method = split_method(method)[0]
    if method == "none":
        return None
    if method == SEARCHED:  # searched for the model evaluated: its original length and, when given, its pairs
        return searched_scaling(extra, train_length=train_length, rope=rope)
    if method == "native":
        return native
    spec = get_scaling(method)
    params = dict(extra or {})  # explicit parameters win over the derived factor and length
    factor = params.pop("factor", max(1.0, factor))
    original = params.pop("original_max_position_embeddings", train_length)
    try:
        return spec.config_class.from_options(factor=factor, original_length=original, native=native, **params)
    except MissingParameters as error:
        raise LookupError(f"{error}, which an evaluation sweep cannot derive") from error


def method_extra(method: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
    """What :func:`scaling_for` needs from ``--param`` for ``method``: the search.json of ``searched``, nothing for
    the others (the rest of ``params`` belongs to attention methods)."""
    if split_method(method)[0] != SEARCHED:
        return None
    return {SEARCHED_PARAM: (params or {}).get(SEARCHED_PARAM)}


def describe_scaling(scaling: ScalingConfig | None) -> dict[str, Any]:
    """JSON-ready description of a scaling config (``{"rope_type": "default"}`` for none)."""
    if scaling is None:
        return {"rope_type": "default"}
    return scaling.describe()


def applied_factor(scaling: ScalingConfig | None) -> float | None:
    """The factor the applied scaling really uses, what an evaluation row records as ``factor``: 1 for plain RoPE,
    the model's own factor for ``native`` (not the length ratio that was asked for), ``None`` for a scaling without
    one (``base``)."""
    if scaling is None:
        return 1.0
    factor = scaling.describe().get("factor")
    return None if factor is None else float(factor)


#: the training length used to check ``--param`` values before a model is known (ranges only)
CHECK_LENGTH = 4096


def split_method(method: str) -> tuple[str, str | None]:
    """``"yarn+self_extend"`` → ``("yarn", "self_extend")``; ``"self_extend"`` → ``("none", "self_extend")``;
    ``"yarn"`` → ``("yarn", None)``.

    Raises:
        ValueError: an unknown name, more than one ``+``, or a ``+`` not followed by an attention method (the message
            lists the valid names).
    """
    parts = str(method).split("+")
    attentions, scalings = list_attentions(), ("none", "native", SEARCHED, *list_scalings())
    valid = f"scalings: {', '.join(scalings)}; attention methods: {', '.join(attentions)} (join as scaling+attention)"
    if len(parts) == 1 and parts[0] in attentions:
        return "none", parts[0]
    if len(parts) > 2 or parts[0] not in scalings or (len(parts) == 2 and parts[1] not in attentions):
        raise ValueError(f"unknown rope_type or attention method {method!r}; {valid}")
    return parts[0], parts[1] if len(parts) == 2 else None


def attention_for(
    method: str, *, train_length: int, length: int, params: dict[str, Any] | None = None
) -> AttentionConfig | None:
    """The attention config of ``method`` at ``length`` (``None`` when it names no attention method).

    Parameters not in ``params`` are derived by the method from the training length and ``length`` (Self-Extend:
    the authors' rule of thumb); ``params`` may hold parameters of other methods, which this one ignores.

    Raises:
        ValueError: a parameter out of range.
    """
    name = split_method(method)[1]
    if name is None:
        return None
    spec = get_attention(name)
    own = {k: v for k, v in (params or {}).items() if k in spec.parameters()}
    return spec.from_options(train_length=train_length, length=length, **own)


def params_of(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The part of ``params`` that ``method`` takes (its attention method's parameters, ``searched``'s file), for
    settings narrowed to that one method."""
    scaling, attention = split_method(method)
    own = set(get_attention(attention).parameters()) if attention is not None else set()
    own |= {SEARCHED_PARAM} if scaling == SEARCHED else set()
    return {key: value for key, value in params.items() if key in own}


def check_params(methods: tuple[str, ...], params: dict[str, Any]) -> None:
    """Every ``--param`` name must belong to an attention method in ``methods``.

    Raises:
        InvalidArgument: about ``params``: a parameter no listed attention method has (an
            :class:`~ropekit.errors.UnknownParameters` naming it and the allowed ones), or a value out of range.
    """
    names = [a for a in (split_method(m)[1] for m in methods) if a is not None]
    searched = any(split_method(m)[0] == SEARCHED for m in methods)
    allowed = sorted(
        {p for a in names for p in get_attention(a).parameters()} | ({SEARCHED_PARAM} if searched else set())
    )
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        owners = [*dict.fromkeys(names), *([SEARCHED] if searched else [])]
        where = f"allowed for {', '.join(owners)}: {allowed}" if owners else "no attention method listed"
        raise UnknownParameters(unknown, allowed, f"unknown params {unknown}; {where}")
    if searched:  # the file is read now, not a method into a sweep
        searched_scaling(params)
    for name in dict.fromkeys(names):  # ranges checked now, not lengths into a sweep
        spec = get_attention(name)
        own = {k: v for k, v in params.items() if k in spec.parameters()}
        try:
            spec.from_options(train_length=CHECK_LENGTH, length=CHECK_LENGTH, **own)
        except (TypeError, ValueError) as error:
            kind = ArgumentType if isinstance(error, TypeError) else InvalidArgument
            raise kind("params", params, message=f"params of {name}: {error}", leads=False) from error


def configure(
    model: EvalModel, method: str, *, length: int, train_length: int, factor: float | str, params: dict
) -> dict:
    """Set ``model`` up for ``method`` at ``length`` (its scaling at the factor :func:`factor_for` gives, and its
    attention method); return what a result row records about it: ``factor``, ``scaling`` and ``attention``.
    Depends only on its arguments, not on what the model ran before, so every (method, length) can be set up alone.

    Raises:
        LookupError: the method cannot run on ``model`` (an evaluation skips it).
    """
    scaling = scaling_for(
        method,
        factor=factor_for(length, train_length, factor),
        train_length=train_length,
        native=model.native_scaling,
        extra=method_extra(method, params),
        rope=model.rope,
    )
    model.set_scaling(scaling)  # a model without RoPE refuses every scaling but 'none' (LookupError)
    attention = attention_for(method, train_length=train_length, length=length, params=params)
    where = model.set_attention(attention) if attention is not None else None
    return {
        "factor": applied_factor(scaling),
        "scaling": describe_scaling(scaling),
        "attention": None if attention is None else {**attention.describe(), "layer_types": where},
    }


def restore(model: EvalModel, method: str) -> None:
    """Undo :func:`configure` of ``method``: the model's own scaling, and plain attention if the method has one."""
    model.set_scaling(model.native_scaling)
    if split_method(method)[1] is not None:
        model.set_attention(None)


@contextlib.contextmanager
def configured_groups(
    model: EvalModel, units: Sequence[tuple], indices: list[int], settings: Any
) -> Iterator[Iterator[tuple[str, int, list[int], dict | None, str | None]]]:
    """The units ``indices`` (ascending) grouped by their (method, length), each group with its method put on
    ``model`` (:func:`configure`) before it is yielded: ``(method, length, indices, described, skipped)``, where
    ``skipped`` is why the method cannot run on ``model`` (then ``described`` is ``None``, and its later lengths
    are not tried). Whatever method is on the model is taken off (:func:`restore`) when the block ends, also on an
    error."""
    current: list[str] = []

    def groups() -> Iterator[tuple[str, int, list[int], dict | None, str | None]]:
        skipped: dict[str, str] = {}
        for (method, length), chunk in itertools.groupby(indices, key=lambda i: units[i][:2]):
            if current and method != current[0]:
                restore(model, current.pop())
            if not current:
                current.append(method)
            described = None
            if method not in skipped:
                try:
                    described = configure(
                        model,
                        method,
                        length=length,
                        train_length=model.train_length,
                        factor=settings.factor,
                        params=settings.params,
                    )
                except LookupError as error:
                    skipped[method] = str(error)
            yield method, length, list(chunk), described, skipped.get(method)

    try:
        yield groups()
    finally:
        if current:
            restore(model, current[0])
