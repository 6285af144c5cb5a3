"""The searched factors beside the theory: per pair, the searched factor against NTK's and YaRN's at the same s,
the plain wavelength against L0, and where theory's critical pair and the found one fall (``ropekit inspect`` and
``ropekit plan`` on a searched folder, ``ropekit plot searched``)."""

from __future__ import annotations

import json
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
    """A ``search.json``'s contents.

    Raises:
        ValueError: not JSON, or not a search (no ``long_factor``/``critical_pair``/``rope``).
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{str(path)!r} is not a search.json ropekit can read: {error}") from None
    missing = [key for key in ("long_factor", "critical_pair", "rope", "original_length", "factor") if key not in data]
    if missing:
        raise ValueError(f"{str(path)!r} is not a search.json: it has no {', '.join(missing)}")
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
