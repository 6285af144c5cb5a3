"""matplotlib for every ropekit figure: ``pyplot()`` on the Agg backend and ``save_figure``.

matplotlib is an optional extra (``pip install 'ropekit[plot]'``), imported only when a figure is drawn, so that
``import ropekit`` and the CLI's start-up stay light. Used by :mod:`ropekit.plots` (theory figures),
:mod:`ropekit.eval.figures` (report figures) and the experiments' pages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend (files only, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write (PNG or SVG by suffix, 110 dpi) and close ``fig``; return ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path
