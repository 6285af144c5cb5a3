"""matplotlib for every ropekit figure: ``pyplot()`` on the Agg backend and ``save_figure``.

matplotlib is an optional extra (``pip install 'ropekit[plot]'``), imported only when a figure is drawn, so that
``import ropekit`` and the CLI's start-up stay light. Used by :mod:`ropekit.theory.figures` (theory figures),
:mod:`ropekit.eval.figures` (report figures) and the experiments' pages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["label_axes", "pyplot", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend (files only, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, *, crop: bool = False) -> Path:
    """Lay out, write (PNG or SVG by suffix, 110 dpi) and close ``fig``; return ``path``.

    A figure made with its own layout engine (``layout="constrained"``, as a grid of panels with one colour bar)
    keeps it; any other is laid out tight. ``crop`` trims the saved image to what is drawn (``bbox_inches="tight"``).
    """
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=110, **({"bbox_inches": "tight"} if crop else {}))
    pyplot().close(fig)
    return path


def label_axes(
    ax: Any, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None, *, legend: bool = True
) -> None:
    """The house style of a line chart: labels, a light grid on major and minor ticks, a small legend."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(fontsize=8)
