"""matplotlib figures for evaluation reports (imported lazily; Agg backend, PNG output).

The report's wavelength figure is a theory figure: :func:`ropekit.theory.figures.wavelength_lines_figure`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit._plotting import label_axes, pyplot, save_figure

__all__ = ["method_heatmaps", "passkey_figure", "perplexity_figure"]


def perplexity_figure(rows: list[dict[str, Any]], train_length: int, path: Path) -> Path:
    """Perplexity against length, one line per method, log-log, with the training length marked."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for method in methods:
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["length"])
        lengths = [r["length"] for r in mine]
        axes[0].plot(lengths, [r["perplexity"] for r in mine], marker="o", label=method)
        beyond = [(r["length"], r["beyond"]) for r in mine if r["beyond"] is not None]
        if beyond:
            axes[1].plot(*zip(*beyond, strict=True), marker="o", label=method)
    for ax, title in zip(
        axes, ("all positions", f"positions beyond the training length ({train_length})"), strict=True
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axvline(train_length, color="grey", linestyle=":", linewidth=1)
        label_axes(ax, "context length (tokens)", "perplexity", title, legend=ax is axes[0])
    return save_figure(fig, path)


def passkey_figure(rows: list[dict[str, Any]], path: Path) -> Path:
    """One heatmap per method: accuracy over (needle depth × length)."""
    depths = sorted({r["depth"] for r in rows})
    return method_heatmaps(
        rows,
        path,
        row_key="depth",
        row_values=depths,
        row_labels=[f"{d:.2f}" for d in depths],
        value_key="accuracy",
        colorbar="passkey accuracy",
        cols=4,
        panel=(3.2, 2.8),
        ylabel="needle depth",
        origin="lower",
    )


def method_heatmaps(
    rows: list[dict[str, Any]],
    path: Path,
    *,
    row_key: str,
    row_values: list[Any],
    row_labels: list[str],
    value_key: str,
    colorbar: str,
    cols: int,
    panel: tuple[float, float],
    ylabel: str | None = None,
    origin: str = "upper",
    missing: str | None = None,
) -> Path:
    """A grid of heatmaps, one per method (at most ``cols`` a row, each ``panel`` inches): ``row[value_key]`` in
    [0, 1] over (``row[row_key]`` × length), each cell labelled with its percentage, one shared colour bar.

    Rows of the heatmap are ``row_values`` (ticks ``row_labels``, with ``ylabel`` on the first column only; without
    ``ylabel`` the tick labels too are on the first column only). A cell with no value is left blank, or, with
    ``missing``, grey and labelled with that text.
    """
    plt = pyplot()
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lengths = sorted({r["length"] for r in rows})
    cols = min(cols, len(methods))
    nrows = int(np.ceil(len(methods) / cols))
    size = (panel[0] * cols, panel[1] * nrows)
    fig, axes = plt.subplots(nrows, cols, figsize=size, squeeze=False, layout="constrained")
    image = None
    for index, (ax, method) in enumerate(zip(axes.flat, methods, strict=False)):
        grid = np.full((len(row_values), len(lengths)), np.nan)
        for r in rows:
            if r["method"] == method:
                grid[row_values.index(r[row_key]), lengths.index(r["length"])] = r[value_key]
        if missing is not None:
            ax.set_facecolor("#dddddd")
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin=origin)
        for (i, j), value in np.ndenumerate(grid):
            if np.isfinite(value):
                color = "white" if value < 0.6 else "black"
                ax.text(j, i, f"{value:.0%}", ha="center", va="center", fontsize=7, color=color)
            elif missing is not None:
                ax.text(j, i, missing, ha="center", va="center", fontsize=7, color="dimgrey")
        first_column = index % cols == 0
        ax.set_title(method)
        ax.set_xticks(range(len(lengths)), [str(v) for v in lengths], fontsize=7)
        labels = row_labels if first_column or ylabel is not None else [""] * len(row_labels)
        ax.set_yticks(range(len(row_values)), labels, fontsize=7)
        ax.set_xlabel("length")
        if ylabel is not None and first_column:  # inner panels: it would overprint the tick labels to the left
            ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[len(methods) :]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label=colorbar)
    return save_figure(fig, path, crop=True)
