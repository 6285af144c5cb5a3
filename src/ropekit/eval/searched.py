"""The ``searched`` method of an evaluation: the per-pair factors ``ropekit search`` wrote to a ``search.json``, as
``longrope`` (``--methods yarn,searched --param factors=DIR/search.json``).

Only the keys ``long_factor``, ``short_factor``, ``original_length`` and ``factor`` are read (the schema:
:mod:`ropekit.search.result`), so a hand-written file with those four works too. The factors are used at every
evaluated length as ``longrope`` uses them (equal short and long factors: the same at every length; short ones all
ones: plain RoPE up to L0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ropekit.errors import InvalidArgument

if TYPE_CHECKING:
    from ropekit.scaling.longrope import LongRopeScaling

#: the method's name in ``--methods``, and the ``--param`` naming its file
NAME, PARAM = "searched", "factors"


def read_searched(path: str | Path) -> tuple[dict[str, Any], LongRopeScaling]:
    """A ``search.json`` (or the folder holding one): its contents and its factors as ``longrope``, every value the
    factors need checked (finite factors above 0, an integer original length of 2 to
    :data:`~ropekit._costs.MAX_LENGTH`, a factor of 1 or more, as many short factors as long ones). The one check of
    a search.json: ``--param factors=``, ``plot searched`` and ``inspect``/``plan`` on a searched folder read it here.

    Raises:
        ValueError: (the message names the file and the key) not JSON, not an object, a key missing or out of range.
    """
    from ropekit._costs import MAX_LENGTH
    from ropekit._validate import require_int
    from ropekit.scaling.longrope import LongRopeScaling

    path = Path(str(path))
    if path.is_dir():
        path = path / "search.json"
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        original = require_int("original_length", data["original_length"], minimum=2)
        if original > MAX_LENGTH:
            raise ValueError(f"original_length must be <= {MAX_LENGTH:,}, got {original:,}")
        scaling = LongRopeScaling(
            short_factor=data["short_factor"],
            long_factor=data["long_factor"],
            original_max_position_embeddings=original,
            factor=data["factor"],
        )
        if len(scaling.short_factor) != len(scaling.long_factor):
            raise ValueError(
                f"short_factor has {len(scaling.short_factor)} entries, long_factor {len(scaling.long_factor)}"
            )
    except (OSError, ValueError, KeyError, TypeError) as error:
        what = f"no key {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{str(path)!r} is not a search.json ropekit can read: {what}") from None
    return data, scaling


def searched_scaling(params: dict[str, Any] | None, *, train_length: int | None = None, rope: Any = None):
    """The :class:`~ropekit.scaling.longrope.LongRopeScaling` of ``params["factors"]`` (a search.json, or the
    folder holding one: :func:`read_searched`), checked against the model evaluated when it is given.

    Args:
        train_length: the evaluated model's original length, which the search's must equal.
        rope: the evaluated model's :class:`~ropekit.config.RopeConfig`, whose pair count the factors must have.

    Raises:
        InvalidArgument: about ``params``: no ``factors``, no such file, a file :func:`read_searched` refuses, or
            factors searched for another model (another original length or pair count).
    """
    path = (params or {}).get(PARAM)
    if path is None:
        raise InvalidArgument(
            "params",
            params,
            message=f"method {NAME!r} needs the parameter {PARAM}=DIR/search.json (the output of a search)",
        )
    try:
        _, scaling = read_searched(path)
    except ValueError as error:
        raise InvalidArgument("params", params, message=f"{PARAM}={str(path)!r}: {error}", leads=False) from None
    other = []
    if train_length is not None and scaling.original_max_position_embeddings != int(train_length):
        found = scaling.original_max_position_embeddings
        other.append(f"original length {found:,} where the model's is {int(train_length):,}")
    if rope is not None and len(scaling.long_factor) != rope.dim // 2:
        other.append(f"{len(scaling.long_factor)} factors where the model has {rope.dim // 2} rotary pairs")
    if other:
        message = f"{PARAM}={str(path)!r} was searched for another model ({'; '.join(other)})"
        raise InvalidArgument("params", params, message=message, leads=False)
    return scaling
