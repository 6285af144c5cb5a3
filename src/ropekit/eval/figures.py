"""matplotlib figures for evaluation reports (imported lazily; Agg backend, PNG output).

The report's wavelength figure is a theory figure: :func:`ropekit.plots.wavelength_figure`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit._plotting import label_axes, pyplot, save_figure

__all__ = ["passkey_figure", "perplexity_figure"]


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
    plt = pyplot()
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lengths = sorted({r["length"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    cols = min(4, len(methods))
    nrows = int(np.ceil(len(methods) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.8 * nrows), squeeze=False, layout="constrained")
    image = None
    for index, (ax, method) in enumerate(zip(axes.flat, methods, strict=False)):
        grid = np.full((len(depths), len(lengths)), np.nan)
        for r in rows:
            if r["method"] == method:
                grid[depths.index(r["depth"]), lengths.index(r["length"])] = r["accuracy"]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        for (i, j), value in np.ndenumerate(grid):
            if np.isfinite(value):
                ax.text(
                    j,
                    i,
                    f"{value:.0%}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if value < 0.6 else "black",
                )
        ax.set_title(method)
        ax.set_xticks(range(len(lengths)), [str(v) for v in lengths], fontsize=7)
        ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths], fontsize=7)
        ax.set_xlabel("length")
        if index % cols == 0:  # on inner panels the label would overprint the tick labels of the panel to the left
            ax.set_ylabel("needle depth")
    for ax in list(axes.flat)[len(methods) :]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="passkey accuracy")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
