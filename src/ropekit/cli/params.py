"""``--param``: the one grammar of a method's parameters on the command line, and its one parser.

Each ``--param`` holds one or more ``NAME=VALUE`` items separated by commas; a value may itself be a comma-separated
list of numbers (a comma followed by ``NAME=`` starts the next item). So ``--param group=4,window=64``,
``--param short_factor=1,1.5`` and ``--param beta_fast=16 --param beta_slow=2`` all read the same way on every
command. What a value means is the method's own business: the scaling and attention configs' ``parse_param`` turn
the text into the field's value (:meth:`ropekit.scaling.registry.ScalingConfig.parse_param`,
:meth:`ropekit.attention.registry.AttentionConfig.parse_param`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ropekit.cli.common import error_message, fail

_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(.*)$", re.DOTALL)

#: how a value's text becomes a value: ``(name, text) -> value``, raising ``ValueError`` naming ``name``
Parse = Callable[[str, str], Any]


def split_params(items: str | Iterable[str] | None, option: str = "--param") -> dict[str, str]:
    """``["group=4,window=64", "short_factor=1,1.5"]`` -> ``{"group": "4", "window": "64", "short_factor":
    "1,1.5"}``: the grammar alone, values as text; a malformed item or a name given twice is the one-line error."""
    texts: dict[str, str] = {}
    for item in [items] if isinstance(items, str) else items or ():
        name = None
        for piece in str(item).split(","):
            match = _ITEM.match(piece)
            if match is None and name is None:
                raise fail(f"{option} items must look like name=value, got {piece.strip()!r}{_within(piece, item)}")
            if match is None:  # one more number of the previous item's list
                texts[name] += "," + piece.strip()
                continue
            name, text = match.group(1), match.group(2).strip()
            if name in texts:
                raise fail(f"{option} gives {name!r} twice in {item!r}")
            texts[name] = text
        empty = [key for key, text in texts.items() if not text]
        if empty:
            raise fail(
                f"{option} items must look like name=value, got {empty[0] + '='!r}{_within(empty[0] + '=', item)}"
            )
    return texts


def _within(piece: str, item: str) -> str:
    """`` in 'a=1,b'`` when the malformed ``piece`` is part of a longer ``item``, else nothing."""
    return "" if piece.strip() == str(item).strip() else f" in {item!r}"


def parse_params(items: str | Iterable[str] | None, parse: Parse, option: str = "--param") -> dict[str, Any]:
    """The values of ``--param`` (:func:`split_params`), each read by ``parse`` (the method's own reader); a value
    it refuses is the one-line error ``--param NAME...`` with the reader's reason."""
    from ropekit.errors import InvalidArgument

    params: dict[str, Any] = {}
    for name, text in split_params(items, option).items():
        try:
            params[name] = parse(name, text)
        except InvalidArgument as error:
            raise fail(error_message(error, {error.argument: f"{option} {name}"})) from None
    return params


@dataclass(frozen=True)
class ScalingParams:
    """A method's fields as the command line gives them (:func:`scaling_params`): its config class, the fields read
    (``values``; ``--param`` wins over an option of the same meaning) and the option each field was typed as."""

    name: str
    config_class: Any
    values: dict[str, Any]
    names: dict[str, str]


def scaling_params(
    name: str,
    *,
    params: str | Iterable[str] | None = None,
    aliases: dict[str, str | None] | None = None,
    options: tuple[str, ...] = (),
    **extra: Any,
) -> ScalingParams | None:
    """The fields of method ``name`` from CLI options (``None`` for ``none``/``default``), each read by the method's
    :meth:`~ropekit.scaling.registry.ScalingConfig.parse_param`; an unknown method, or ``--param`` beside plain
    RoPE, is the one-line error.

    Args:
        name: the ``--scaling`` value.
        params: the ``--param`` items.
        aliases: field -> text of the command's own option for it (``{"beta_fast": "16"}`` from ``--beta-fast``;
            ``None``: not given), read as ``--param`` values are; a ``--param`` of the same field wins.
        options: fields the command has its own option for (its aliases, and ``extra``'s), named in errors as
            :data:`ropekit.cli.flags.FLAGS` names them unless the user gave the field as ``--param``.
        extra: fields given as values by the command's other options (``--factors``: ``short_factor``).
    """
    from ropekit.cli.common import scaling_choices
    from ropekit.cli.flags import FLAGS, SCALING_FIELDS
    from ropekit.scaling import get_scaling

    if name in ("none", "default"):
        if params:
            raise fail(f"--param {', '.join(split_params(params))} needs --scaling (plain RoPE has no parameters)")
        return None
    try:
        method = get_scaling(name)
    except (TypeError, ValueError):
        raise fail(f"--scaling: unknown rope_type {name!r}; one of {', '.join(scaling_choices())}") from None
    config_class = method.config_class
    given = parse_params(params, config_class.parse_param)
    for field, text in (aliases or {}).items():
        if text is not None:
            extra.update(parse_params([f"{field}={text}"], config_class.parse_param, FLAGS[field]))
    values = {**{k: v for k, v in extra.items() if v is not None}, **given}
    typed = {field: FLAGS[field] for field in (*SCALING_FIELDS, *options)}
    return ScalingParams(name, config_class, values, {**typed, **{field: f"--param {field}" for field in given}})


@contextmanager
def scaling_errors(parsed: ScalingParams, names: Mapping[str, str] | None = None) -> Iterator[None]:
    """The one-line error of building ``parsed``'s method: a missing or unknown field named as the option that
    sets it (``--param NAME`` where typed so), any other library error with ``names``' options."""
    from ropekit.cli.flags import SCALING_FIELDS
    from ropekit.errors import UnknownParameters
    from ropekit.scaling.registry import MissingParameters

    typed, values = parsed.names, parsed.values
    try:
        yield
    except MissingParameters as error:
        needed = dict.fromkeys(typed.get(field, f"--param {field}=...") for field in error.missing)
        raise fail(
            f"--scaling {parsed.name} needs {', '.join(needed)} (required fields of {parsed.config_class.__name__}: "
            f"{error.missing})"
        ) from error
    except UnknownParameters as error:
        named = [typed.get(field, f"--param {field}") for field in values if field in error.value]
        raise fail(f"{'/'.join(dict.fromkeys(named)) or '--param'}: {error}") from error
    except (TypeError, ValueError) as error:
        shown = {key: option for key, option in typed.items() if key in values or key in SCALING_FIELDS}
        raise fail(error_message(error, {**(names or {}), **shown})) from error


def build_scaling(
    name: str,
    factor: float | None,
    original_length: int | None,
    *,
    base: float | None = None,
    params: str | Iterable[str] | None = None,
    aliases: dict[str, str | None] | None = None,
    options: tuple[str, ...] = (),
    **extra: Any,
):
    """A scaling config from CLI options without a model (``none``/``default`` give ``None``; the fields as
    :func:`scaling_params` reads them), built by the method's own
    :meth:`~ropekit.scaling.registry.ScalingConfig.from_options`; ``factor``, ``original_length`` and ``base`` are
    ``--factor``, ``--original-length`` and ``--base`` (a ``--param`` of the same field wins)."""
    parsed = scaling_params(name, params=params, aliases=aliases, options=options, **extra)
    if parsed is None:
        return None
    values = dict(parsed.values)
    factor = values.pop("factor", factor)
    original_length = values.pop("original_max_position_embeddings", original_length)
    base = values.pop("base", base)
    with scaling_errors(parsed):
        return parsed.config_class.from_options(factor=factor, original_length=original_length, base=base, **values)
