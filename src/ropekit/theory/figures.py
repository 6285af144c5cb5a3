"""matplotlib figures of the RoPE theory: decay, the base bound, wavelengths, scaling ratios.

matplotlib is imported inside each function (Agg backend, via :mod:`ropekit._plotting`), so importing this
module stays light. The file type follows the suffix of ``path`` (``.png`` or ``.svg``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ropekit._plotting import label_axes, pyplot, save_figure
from ropekit.config import RopeConfig
from ropekit.scaling import LinearScaling, Llama3Scaling, NTKScaling, YarnScaling, frequencies, inv_freq
from ropekit.theory.bound import base_bound, max_context_length, smallest_feasible_base
from ropekit.theory.decay import roformer_upper_bound, similarity_margin
from ropekit.theory.published import PAPER_BOUND, PUBLISHED_ROTARY_DIM, SU_BOUND

#: Men et al.'s fit of their Table 1: base ≈ 0.0424·L^1.628 (arXiv 2405.14591, §4).
PAPER_FIT = (0.0424, 1.628)


def _methods(factor: float, original_length: int) -> dict[str, object]:
    return {
        "linear": LinearScaling(factor=factor),
        "ntk": NTKScaling(factor=factor),
        "yarn": YarnScaling(factor=factor, original_max_position_embeddings=original_length),
        "llama3": Llama3Scaling(factor=factor, original_max_position_embeddings=original_length),
    }


def decay_figure(path: Path, rotary_dim: int = 128, base: float = 10000.0, max_distance: int = 65536) -> Path:
    """B_m(b) (Men et al., eq. 8) and RoFormer's relative upper bound (arXiv 2104.09864, §3.4.3) against m.

    Args:
        path: output file (``.png`` or ``.svg``).
        rotary_dim: the rotary dimension d.
        base: the RoPE base b.
        max_distance: the largest distance m plotted.
    """
    plt = pyplot()
    m = np.arange(1, max_distance + 1, dtype=np.float64)
    margin = similarity_margin(m, rotary_dim, base)  # (M,)
    sparse = np.unique(np.geomspace(1, max_distance, 600).round())  # the bound is costlier: fewer points
    upper = roformer_upper_bound(sparse, rotary_dim, base)
    first = max_context_length(base, rotary_dim, limit=max_distance + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    top.plot(m, margin, linewidth=0.6, color="C0", label=f"B_m(b), b = {base:g}")
    top.axhline(0, color="black", linewidth=0.8)
    if first is not None:
        top.axvline(first, color="C3", linestyle="--", label=f"first B_m < 0: m = {first:,}")
    top.set_xscale("log")
    label_axes(top, None, "B_m(b) = Σ cos(m·θ_i)", f"Long-term decay, d = {rotary_dim}, b = {base:g}")
    bottom.plot(sparse, upper, color="C1", label="RoFormer bound (1/(d/2))·Σ_j |S_j|")
    bottom.set_xscale("log")
    label_axes(bottom, "relative distance m (tokens)", "relative upper bound")
    return save_figure(fig, path)


def bound_figure(
    path: Path, rotary_dim: int = 128, max_context: int = 65536, robust_up_to: int = 4096, min_context: int = 1024
) -> Path:
    """The smallest feasible base against context length (log-log), with the published values as markers.

    Computed exactly at powers of two from ``min_context`` to ``max_context`` (about 35 s up to 64k on 2 cores);
    the robust bound is added where L <= ``robust_up_to``, and the paper's fit is drawn as a line. The published
    tables are for d = 128 only.

    Args:
        path: output file (``.png`` or ``.svg``).
        rotary_dim: the rotary dimension d.
        max_context: the largest context length computed.
        robust_up_to: compute the robust bound up to this length.
        min_context: the smallest context length computed.
    """
    plt = pyplot()
    lengths = [2**k for k in range(math.ceil(math.log2(min_context)), math.floor(math.log2(max_context)) + 1)]
    smallest = [smallest_feasible_base(length, rotary_dim) for length in lengths]
    robust = [(length, base_bound(length, rotary_dim).robust_base) for length in lengths if length <= robust_up_to]
    span = np.geomspace(lengths[0], max(lengths[-1], max(PAPER_BOUND) if rotary_dim == PUBLISHED_ROTARY_DIM else 0), 60)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ax.plot(lengths, smallest, marker="o", markersize=4, color="C0", zorder=4, label="ropekit: smallest feasible (A)")
    if robust:
        ax.plot(*zip(*robust, strict=True), marker="s", markersize=4, color="C2", zorder=4, label="ropekit: robust (B)")
    if rotary_dim == PUBLISHED_ROTARY_DIM:
        ax.plot(span, PAPER_FIT[0] * span ** PAPER_FIT[1], color="C1", linewidth=0.8, alpha=0.6, label="paper's fit")
        ax.scatter(
            list(PAPER_BOUND), list(PAPER_BOUND.values()), marker="x", color="C1", zorder=3, label="Men et al., Table 1"
        )
        ax.scatter(
            list(SU_BOUND), list(SU_BOUND.values()), marker="+", s=80, color="C3", zorder=3, label="Su (kexue.fm 10122)"
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    label_axes(ax, "context length L (tokens)", "base b", f"Base of RoPE bounds context length, d = {rotary_dim}")
    return save_figure(fig, path)


def wavelengths_figure(
    path: Path, rotary_dim: int = 128, base: float = 10000.0, train_length: int = 4096, factor: float = 4.0
) -> Path:
    """Wavelength per pair (log scale) of plain RoPE and of each method at ``factor``, with the training length."""
    rope = RopeConfig(rotary_dim, base=base)
    wavelengths = {"plain": frequencies(rope).wavelengths}
    for name, spec in _methods(factor, train_length).items():
        wavelengths[f"{name} (s = {factor:g})"] = frequencies(rope.replace(scaling=spec)).wavelengths
    return wavelength_lines_figure(path, wavelengths, train_length)


def wavelength_lines_figure(path: Path, wavelengths: dict[str, np.ndarray], train_length: int) -> Path:
    """Wavelength per pair (log scale), one line per entry of ``wavelengths``, with the training length marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in wavelengths.items():
        ax.plot(np.arange(len(values)), values, marker=".", label=label)
    ax.axhline(train_length, color="grey", linestyle=":", label=f"training length {train_length}")
    ax.set_yscale("log")
    label_axes(ax, "pair index i", "wavelength 2π/θ_i (tokens)", "RoPE wavelengths per pair")
    return save_figure(fig, path)


def scaling_figure(
    path: Path, rotary_dim: int = 128, base: float = 10000.0, train_length: int = 4096, factor: float = 4.0
) -> Path:
    """Scaled / plain frequency per pair against the plain wavelength, for each method at ``factor`` (log-log)."""
    plt = pyplot()
    rope = RopeConfig(rotary_dim, base=base)
    plain = inv_freq(rope.dim, rope.base)
    wavelength = 2 * np.pi / plain
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, spec in _methods(factor, train_length).items():
        ratio = frequencies(rope.replace(scaling=spec)).inv_freq / plain
        ax.plot(wavelength, ratio, marker=".", label=name)
    ax.axvline(train_length, color="grey", linestyle=":", label=f"training length {train_length:,}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = np.geomspace(1 / factor, 1, 5) if factor > 1 else np.array([1.0])
    ax.set_yticks(ticks, [f"{tick:.3g}" for tick in ticks])
    ax.set_yticks([], minor=True)
    title = f"Frequency ratio per pair, s = {factor:g}, d = {rotary_dim}, b = {base:g}"
    label_axes(ax, "plain wavelength 2π/θ_i (tokens)", "scaled θ_i / plain θ_i", title)
    return save_figure(fig, path)
