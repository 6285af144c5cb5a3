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
from typing import Any

from ropekit.errors import InvalidArgument

#: the method's name in ``--methods``, and the ``--param`` naming its file
NAME, PARAM = "searched", "factors"


def searched_scaling(params: dict[str, Any] | None):
    """The :class:`~ropekit.scaling.longrope.LongRopeScaling` of ``params["factors"]`` (a search.json, or the
    folder holding one).

    Raises:
        InvalidArgument: about ``params``: no ``factors``, no such file, or a file without the keys above.
    """
    from ropekit.scaling.longrope import LongRopeScaling

    path = (params or {}).get(PARAM)
    if path is None:
        raise InvalidArgument(
            "params",
            params,
            message=f"method {NAME!r} needs the parameter {PARAM}=DIR/search.json (the output of a search)",
        )
    path = Path(str(path))
    if path.is_dir():
        path = path / "search.json"
    try:
        data = json.loads(path.read_text())
        return LongRopeScaling(
            short_factor=tuple(data["short_factor"]),
            long_factor=tuple(data["long_factor"]),
            original_max_position_embeddings=int(data["original_length"]),
            factor=float(data["factor"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        message = f"{PARAM}={str(path)!r} is not a search.json ropekit can read ({type(error).__name__}: {error})"
        raise InvalidArgument("params", params, message=message, leads=False) from None
