"""``--methods`` and ``--param``: which methods an evaluation runs (RoPE scalings, training-free attention methods,
or a scaling+attention pair) and the attention methods' parameters.

The help lists the names the method files declare (:func:`ropekit._registry.declared_names` reads them from the
source), so ``--help`` imports neither numpy nor torch; the names are checked against the registries themselves.
"""

from __future__ import annotations

from typing import Any

import typer

from ropekit._registry import declared_names
from ropekit.cli.common import fail

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
    help="Method parameters: factors=DIR/search.json (searched); attention-method ones, e.g. group=4,window=64 (self_extend), window=128 (rerope), window=128,k=8 "
    "(leaky_rerope), chunk_size=176,local_window=16 (dual_chunk), n_sink=4,window=252 (sinks), shift=84,local=8 (string). Those not given are "
    "derived per length from the training length (Self-Extend: the authors' rule (L - window) * group + window >= "
    "length).",
)


def attention_params(text: str | None, option: str = "--param") -> dict[str, Any]:
    """``"group=4,window=64,k=2.5"`` → ``{"group": 4, "window": 64, "k": 2.5}``: ``--param`` (the one grammar,
    :func:`ropekit.cli.params.parse_params`) read as the attention methods read their parameters (numbers)."""
    from ropekit.attention.registry import AttentionConfig
    from ropekit.cli.params import parse_params
    from ropekit.eval.searched import PARAM

    def parse(name: str, value: str) -> Any:
        return value if name == PARAM else AttentionConfig.parse_param(name, value)

    return parse_params(text, parse, option)


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
