"""What every engine is asked and how its answer is judged against transformers (the reference).

An engine answers a :class:`Probe` with an :class:`Answer`: per served length, the rotation its own code applies at
the probe positions, as the table ``A·cos(p·θ'_i)``, ``A·sin(p·θ'_i)`` (A the attention factor; a vector of ones
in the first rotating half, zeros in the second, rotated by the engine's own RoPE gives exactly this), its softmax
scale, and, where it runs the model here, the logits on the probe ids. :func:`judge` turns the differences into one
:class:`EngineRow`.

Tolerances are float32 noise: a table entry may differ by ``2e-4 + 2e-7·p`` (an angle p·θ rounded in float32 moves
by about 6e-8·p per rounding, on either side), a logit by ``2e-3``, a softmax scale by ``1e-6`` relative. A wrong
base or a missing scaling moves entries by O(1) from position 1 on; a wrong attention factor by its relative error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LOGIT_TOL = 2e-3
SCALE_RTOL = 1e-6


def table_tol(positions: np.ndarray) -> np.ndarray:
    """The float32 tolerance of a table entry at each position (see the module docstring)."""
    return 2e-4 + 2e-7 * np.asarray(positions, dtype=np.float64)


@dataclass(frozen=True)
class Probe:
    """The question put to every engine.

    Attributes:
        original_length: L0.
        target_length: the length the model is served at (``max_position_embeddings`` of the output).
        positions: the positions compared: 0, 1, L0 − 1, L0, L0 + 1, target − 1 and each switch point s and s − 1
            (sorted, unique).
        served_lengths: the lengths the engine is run at: L0, L0 + 1 (a batch whose last position is exactly L0),
            one past each switch, the target.
        ids: token ids for the logits (empty: no logits).
    """

    original_length: int
    target_length: int
    positions: tuple[int, ...]
    served_lengths: tuple[int, ...]
    ids: tuple[int, ...] = ()


def make_probe(original: int, target: int, switches: tuple[int, ...], ids: tuple[int, ...] = ()) -> Probe:
    """The probe for a model of original length ``original`` served at ``target`` with ``switches``."""
    positions = {0, 1, original - 1, original, original + 1, target - 1} | set(switches) | {s - 1 for s in switches}
    served = {original, original + 1, target} | {s + 1 for s in switches}
    return Probe(
        original,
        target,
        tuple(sorted(p for p in positions if 0 <= p < target)),
        tuple(sorted(n for n in served if 1 <= n <= target)),
        ids,
    )


@dataclass
class Answer:
    """One engine's numbers for a :class:`Probe`.

    Attributes:
        tables: served length → float64 array ``(len(positions below it), d/2, 2)`` of A·cos and A·sin.
        softmax_scale: the factor on q·k in the engine's attention (``None``: not read).
        logits: float64 ``(len(ids), vocab)`` (``None``: the engine does not run the model here).
        notes: what the engine chose (e.g. which LongRoPE list at which length).
        interleaved: the pairs the tables are read in: (2i, 2i + 1), else (i, i + d/2). The reference's is
            transformers' own; every engine is asked in it, so an engine that pairs other dimensions differs.
        rope_key: the ``layer_type`` transformers' rotary module was given for the compared layer, recorded from
            its forward (a layer type, or a key of a rope dict keyed by other names: DeepSeek-V4's ``main`` and
            ``compress``); ``None`` where it was given none.
    """

    tables: dict[int, np.ndarray] = field(default_factory=dict)
    softmax_scale: float | None = None
    logits: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)
    interleaved: bool = False
    rope_key: str | None = None


@dataclass(frozen=True)
class Case:
    """What every engine's ``row(case)`` is given (one signature for all engine modules).

    Attributes:
        folder: the extended transformers folder.
        config: its ``config.json`` dict.
        probe: the question.
        reference: transformers' answer to it.
        gguf: the GGUF file of the same model that llama.cpp and Ollama run (``None``: not given).
        baseline: transformers' logits of the unextended model on the probe ids and the source GGUF, on which
            llama.cpp measures its quantisation floor (``None``: not measured).
    """

    folder: Path
    config: dict[str, Any]
    probe: Probe
    reference: Answer
    gguf: Path | None = None
    baseline: tuple[np.ndarray, Path] | None = None


@dataclass
class EngineRow:
    """One engine's verdict.

    Attributes:
        engine: the engine's name.
        version: its version here (``None``: not installed).
        verdict: ``same``, ``differs``, ``cannot express`` or ``cannot run here``.
        detail: the largest difference (same), or how much, from which position and why (differs), or why not.
        launch: the line (or file) that runs this RoPE in the engine.
        numbers: the measured differences (JSON-ready).
        interpreter: the Python interpreter that ran the engine's code (``None``: none ran, or not Python's).
    """

    engine: str
    version: str | None
    verdict: str
    detail: str
    launch: str
    numbers: dict[str, Any] = field(default_factory=dict)
    interpreter: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "version": self.version,
            "verdict": self.verdict,
            "detail": self.detail,
            "launch": self.launch,
            "numbers": self.numbers,
            "interpreter": self.interpreter,
        }


def positions_below(probe: Probe, served: int) -> np.ndarray:
    """The probe positions an engine serving ``served`` tokens computes."""
    return np.asarray([p for p in probe.positions if p < served], dtype=np.int64)


def pair_dims(half: int, interleaved: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(first, second)`` dimensions of each pair: (2i, 2i + 1) if ``interleaved``, else (i, i + half)."""
    first = np.arange(0, 2 * half, 2) if interleaved else np.arange(half)
    return first, (first + 1 if interleaved else first + half)


def unit_probe(half: int, width: int, interleaved: bool) -> np.ndarray:
    """float32 ``(width,)``: ones at the first dimension of each pair (:func:`pair_dims`), zeros elsewhere."""
    vector = np.zeros(width, dtype=np.float32)
    vector[pair_dims(half, interleaved)[0]] = 1.0
    return vector


def rotation_table(rotated: np.ndarray, half: int, interleaved: bool = False) -> np.ndarray:
    """``(positions, half, 2)`` A·cos, A·sin from the rotated :func:`unit_probe` ``(positions, ≥ 2·half)``, read at
    the pairs' dimensions."""
    rotated = np.asarray(rotated, dtype=np.float64)
    first, second = pair_dims(half, interleaved)
    return np.stack([rotated[:, first], rotated[:, second]], axis=-1)


def judge(reference: Answer, theirs: Answer, probe: Probe, *, known: list[str]) -> tuple[str, str, dict[str, Any]]:
    """``(verdict, detail, numbers)`` of ``theirs`` against ``reference``.

    ``known``: the engine's documented behaviours for this configuration (reasons it may differ by design); a
    difference with none is reported as not explained by any.
    """
    numbers: dict[str, Any] = {}
    first: tuple[int, int] | None = None  # (served length, position) of the first difference over tolerance
    worst = 0.0
    for served, ours in reference.tables.items():
        if served not in theirs.tables:
            continue
        positions = positions_below(probe, served)
        diff = np.max(np.abs(theirs.tables[served] - ours), axis=(1, 2))
        numbers[f"table_max_diff@{served}"] = float(diff.max())
        worst = max(worst, float(diff.max()))
        over = np.flatnonzero(diff > table_tol(positions))
        if over.size and first is None:
            first = (served, int(positions[over[0]]))
    if not numbers and (reference.logits is None or theirs.logits is None):
        raise ValueError("the engine answered none of the probe's served lengths and no logits: nothing compared")
    parts = [f"cos/sin max diff {worst:.2g}"] if numbers else []
    differs = first is not None
    if reference.softmax_scale is not None and theirs.softmax_scale is not None:
        ratio = theirs.softmax_scale / reference.softmax_scale
        numbers["softmax_scale"] = [reference.softmax_scale, theirs.softmax_scale]
        if abs(ratio - 1) > SCALE_RTOL:
            differs = True
            parts.append(f"softmax scale {theirs.softmax_scale:.6g} vs {reference.softmax_scale:.6g}")
    if reference.logits is not None and theirs.logits is not None:
        gap = np.abs(theirs.logits - reference.logits).max(axis=-1)
        numbers["logits_max_diff"] = float(gap.max())
        agree = theirs.logits.argmax(-1) == reference.logits.argmax(-1)
        numbers["argmax_agreement"] = float(agree.mean())
        parts.append(f"logits max diff {gap.max():.2g}, argmax agrees at {100 * agree.mean():.0f}%")
        bad = np.flatnonzero(gap > LOGIT_TOL)
        if bad.size:
            differs = True
            numbers["logits_first_position"] = int(bad[0])
    if not differs:
        return "same", "; ".join(parts), numbers
    where = f" from position {first[1]} (cos/sin, served length {first[0]})" if first else ""
    if "logits_first_position" in numbers and (first is None or numbers["logits_first_position"] < first[1]):
        where = f" from position {numbers['logits_first_position']} (logits)"
    why = "; ".join(known) if known else "not explained by any documented behaviour of the engine"
    return "differs", f"{'; '.join(parts)}{where}; why: {why}", numbers
