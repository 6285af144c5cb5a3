"""The searched factors beside the theory: per pair, the searched factor against NTK's and YaRN's at the same s,
the plain wavelength against L0, and where theory's critical pair and the found one fall (``ropekit inspect`` and
``ropekit plan`` on a searched folder, ``ropekit plot searched``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit.config import RopeConfig
from ropekit.search.space import formula_factors

#: the formulas set beside the searched factors, per pair
COMPARED = ("ntk", "yarn")


def find_search(path: str | Path | None) -> Path | None:
    """The ``search.json`` at ``path`` (the file, or a folder holding one), or ``None``."""
    if path is None:
        return None
    path = Path(path)
    found = path / "search.json" if path.is_dir() else path
    return found if found.name == "search.json" and found.is_file() else None


def factor_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per rotary pair: ``pair``, ``wavelength`` (plain, tokens), ``searched``, one column per
    :data:`COMPARED` formula, and ``mark``: ``theory``/``found``/``both`` at the critical pairs.

    Args:
        data: a ``search.json`` (:mod:`ropekit.search.result`).
    """
    rope = RopeConfig(int(data["rope"]["rotary_dim"]), base=float(data["rope"]["base"]))
    original, factor = int(data["original_length"]), float(data["factor"])
    formulas = {name: formula_factors(name, rope, original, factor) for name in COMPARED}
    wavelengths = 2 * np.pi * rope.base ** (np.arange(0, rope.dim, 2, dtype=np.float64) / rope.dim)
    theory, found = data["critical_pair"]["theory"], data["critical_pair"]["found"]
    rows = []
    for pair, value in enumerate(data["long_factor"]):
        marks = [name for name, where in (("theory", theory), ("found", found)) if where == pair]
        rows.append(
            {
                "pair": pair,
                "wavelength": float(wavelengths[pair]),
                "searched": float(value),
                **{name: float(values[pair]) for name, values in formulas.items()},
                "mark": "both" if len(marks) == 2 else (marks[0] if marks else ""),
            }
        )
    return rows


def read_search(path: Path) -> dict[str, Any]:
    """A ``search.json``'s contents, checked for what the per-pair table and figure use: the factors as
    ``--param factors=`` checks them (:func:`ropekit.eval.searched.read_searched`), then ``rope`` (an even integer
    ``rotary_dim`` of twice the factor count, a finite ``base`` above 1), ``critical_pair`` (``found`` and ``theory``
    integers from 0 to the pair count) and an integer ``target_length``.

    Raises:
        ValueError: not a search.json these can be drawn from (the message names the key).
    """
    from ropekit._validate import require_float, require_int
    from ropekit.eval.searched import read_searched

    data, scaling = read_searched(path)
    pairs = len(scaling.long_factor)
    try:
        rope, critical = data["rope"], data["critical_pair"]
        if not isinstance(rope, dict) or not isinstance(critical, dict):
            raise TypeError("rope and critical_pair must be objects")
        if require_int("rope.rotary_dim", rope["rotary_dim"], minimum=2) != 2 * pairs:
            raise ValueError(f"rope.rotary_dim must be twice the {pairs} factors, got {rope['rotary_dim']!r}")
        require_float("rope.base", rope["base"], above=1.0)
        for key in ("found", "theory"):
            if not 0 <= require_int(f"critical_pair.{key}", critical[key], minimum=0) <= pairs:
                raise ValueError(f"critical_pair.{key} must be a pair from 0 to {pairs}, got {critical[key]!r}")
        require_int("target_length", data["target_length"], minimum=1)
    except (KeyError, TypeError, ValueError) as error:
        what = f"no key {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{str(path)!r} is not a search.json ropekit can read: {what}") from None
    return data


def factors_figure(data: dict[str, Any], path: Path) -> Path:
    """Per pair, the searched factors against NTK, YaRN and s (log scale), with theory's critical pair and the
    found one marked."""
    from ropekit._plotting import label_axes, pyplot, save_figure

    rows = factor_rows(data)
    pairs = [row["pair"] for row in rows]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(pairs, [row["searched"] for row in rows], "o-", label="searched", linewidth=2)
    for name in COMPARED:
        ax.plot(pairs, [row[name] for row in rows], "--", label=name)
    ax.axhline(float(data["factor"]), color="grey", linewidth=0.8, label=f"s = {float(data['factor']):g}")
    ax.axvline(data["critical_pair"]["theory"], color="black", linestyle=":", label="critical pair (theory)")
    ax.axvline(data["critical_pair"]["found"], color="tab:red", linestyle=":", label="critical pair (found)")
    ax.set_yscale("log")
    title = f"{data.get('model', '')}: L0 {int(data['original_length']):,} → {int(data['target_length']):,}"
    label_axes(ax, "rotary pair i", "factor (inv_freq plain / scaled)", title)
    return save_figure(fig, path)
