"""``--methods``, ``--param`` and ``--attention-param``: which methods an evaluation runs (RoPE scalings,
training-free attention methods, or a scaling+attention pair), the scaling methods' fields and the attention
methods' parameters.

The help lists the names the method files declare (:func:`ropekit._registry.declared_names` reads them from the
source), so ``--help`` imports neither numpy nor torch; the names are checked against the registries themselves.
"""

from __future__ import annotations

from typing import Any

import typer

from ropekit._registry import declared_names
from ropekit.cli.common import fail, option_errors

#: attention methods ``--methods`` accepts, alone (plain RoPE) or after a scaling and a ``+`` (``yarn+self_extend``)
ATTENTION_NAMES = declared_names("ropekit.attention", "name")

METHODS_HELP = (
    " Attention methods (training-free, they change which relative positions attention sees): "
    + ", ".join(ATTENTION_NAMES)
    + "; alone or on top of a scaling as scaling+method, e.g. yarn+self_extend."
)

#: what ``--methods`` accepts besides the registry's rope_type names
SPECIAL_METHODS = ("none", "native", "searched")
#: what the help lists: the special names, then the rope_type of every scaling method file
METHOD_NAMES = (*SPECIAL_METHODS, *declared_names("ropekit.scaling", "rope_type"))
#: the default of ``--methods`` written out for the help: :func:`ropekit.eval.methods.default_methods` (a test keeps
#: them equal)
DEFAULT_METHODS = "none,linear,ntk,dynamic,yarn,llama3,longrope,self_extend"

METHODS = typer.Option(
    DEFAULT_METHODS,
    help="Comma-separated methods: none (plain RoPE), native (the model's own scaling), searched (the factors of "
    "`ropekit search`, with --param factors=DIR/search.json) or a rope_type name: "
    + ", ".join(METHOD_NAMES[len(SPECIAL_METHODS) :])
    + ". Methods the model cannot run (longrope without searched factors, base) are reported as skipped."
    + METHODS_HELP,
)


PARAM = typer.Option(
    None,
    "--param",
    help="A field of the scaling method, NAME=VALUE: factors=DIR/search.json, the per-pair factors of --methods "
    "searched (the output of `ropekit search`). The other methods' fields are derived from --factor.",
)

ATTENTION_PARAM = typer.Option(
    None,
    "--attention-param",
    help="Attention-method parameters, NAME=VALUE: e.g. group=4,window=64 (self_extend), window=128 (rerope), "
    "window=128,k=8 (leaky_rerope), chunk_size=176,local_window=16 (dual_chunk), n_sink=4,window=252 (sinks), "
    "shift=84,local=8 (string). Those not given are derived per length from the training length (Self-Extend: the "
    "authors' rule (L - window) * group + window >= length).",
)


def attention_params(text: str | None, option: str = "--attention-param") -> dict[str, Any]:
    """``"group=4,window=64,k=2.5"`` → ``{"group": 4, "window": 64, "k": 2.5}``: ``--attention-param`` (the one
    grammar, :func:`ropekit.cli.params.parse_params`) read as the attention methods read their parameters (numbers)."""
    from ropekit.attention.registry import AttentionConfig
    from ropekit.cli.params import parse_params

    return parse_params(text, AttentionConfig.parse_param, option)


def method_params(param: str | None, attention_param: str | None, methods: tuple[str, ...]) -> dict[str, Any]:
    """The evaluation's parameters from ``--param`` (fields of the scaling methods: the searched method's
    ``factors``) and ``--attention-param`` (the attention methods'), each checked against ``methods`` with errors
    naming its own option; one dict, as the evaluation library takes them."""
    from ropekit.cli.params import split_params
    from ropekit.eval.methods import check_params, split_method
    from ropekit.eval.searched import NAME, PARAM, searched_scaling

    for name, value in split_params(attention_param, "--attention-param").items():
        if name == PARAM:
            raise fail(
                f"--attention-param {name}={value}: {name} is a field of the scaling method {NAME}; pass --param {name}={value}"
            )
    attention = attention_params(attention_param)
    attentions = tuple(dict.fromkeys(a for a in (split_method(m)[1] for m in methods) if a is not None))
    with option_errors(params="--attention-param"):
        check_params(attentions, attention)
    scaling = _scaling_params(param, attentions)
    if scaling and not any(split_method(m)[0] == NAME for m in methods):
        raise fail(
            f"--param {PARAM}={scaling[PARAM]}: {PARAM} is a field of the scaling method {NAME}; add it to --methods"
        )
    if any(split_method(m)[0] == NAME for m in methods):
        with option_errors(params="--param"):
            searched_scaling(scaling)
    return {**scaling, **attention}


def _scaling_params(text: str | None, listed: tuple[str, ...]) -> dict[str, str]:
    """``--param``'s items as text: the searched method's ``factors``; an attention parameter is refused with the
    option that sets it (``--attention-param``), any other name as no field of an evaluated scaling."""
    from ropekit.attention import get_attention, list_attentions
    from ropekit.cli.params import split_params
    from ropekit.eval.searched import NAME, PARAM

    items = split_params(text, "--param")
    for name, value in items.items():
        known = (*listed, *(m for m in DEFAULT_METHODS.split(",") if m in ATTENTION_NAMES), *list_attentions())
        owners = [a for a in known if name in get_attention(a).parameters()]
        if owners:
            raise fail(
                f"--param {name}={value}: {name} is a parameter of the attention method {owners[0]}; pass "
                f"--attention-param {name}={value}"
            )
        if name != PARAM:
            raise fail(
                f"--param {name}={value}: not a field the evaluation takes; it takes {PARAM}=DIR/search.json (the "
                f"scaling fields of --methods {NAME}) and derives the other methods' fields from --factor"
            )
    return items


def parse_methods(text: str, option: str = "--methods") -> tuple[str, ...]:
    """Method names from ``--methods``, each checked against the registry (the error lists every valid name)."""
    from ropekit.attention import list_attentions
    from ropekit.eval.methods import split_method
    from ropekit.scaling import list_scalings

    valid = ", ".join((*SPECIAL_METHODS, *list_scalings(), *list_attentions()))
    items = [m.strip() for m in str(text).split(",")]
    if not any(items):
        raise fail(f"{option} must name at least one method, got {text!r}; valid: {valid}")
    if not all(items):
        raise fail(f"{option} has an empty item in {text!r}; valid names: {valid}")
    for name in items:
        try:
            split_method(name)
        except ValueError:
            raise fail(f"{option}: unknown rope_type {name!r}; valid: {valid} (or scaling+attention)") from None
    return tuple(dict.fromkeys(items))
