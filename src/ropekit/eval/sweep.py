"""Per-method sweeps: perplexity against length and passkey accuracy for every method in a list.

Every result row carries the full description of its run (method and parameters, model, evaluation-text
hash, ropekit version) so two runs can be compared field by field.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ropekit._validate import require_choice, require_float, require_int
from ropekit.eval.methods import describe_scaling, factor_for, scaling_for
from ropekit.eval.models import EvalModel
from ropekit.eval.passkey import passkey_grid
from ropekit.eval.perplexity import MODES, perplexity_at
from ropekit.model.corpus import heldout_bytes


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """What to measure. Lengths are multiples of the training length; each is validated here.

    Raises:
        ValueError: no methods, a multiple <= 0, a depth outside [0, 1], ``factor`` neither ``"auto"`` nor >= 1,
            an unknown mode, or a count (``stride``, ``max_tokens``, ``trials``) < 1.
    """

    methods: tuple[str, ...]
    multiples: tuple[float, ...] = (1, 2, 4, 8, 16)
    passkey_multiples: tuple[float, ...] = (1, 2, 4, 8)
    depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    factor: float | str = "auto"
    mode: str = "nonoverlap"
    stride: int = 256
    max_tokens: int = 16384
    trials: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("methods must name at least one method, got none")
        for name in ("multiples", "passkey_multiples"):
            for value in getattr(self, name):
                require_float(name, value, above=0.0)
        for depth in self.depths:
            if not 0.0 <= require_float("depths", depth) <= 1.0:
                raise ValueError(f"depths must be in [0, 1] (0 = start of the filler), got {depth!r}")
        if self.factor != "auto":
            require_float("factor", self.factor, at_least=1.0)
        require_choice("mode", self.mode, MODES)
        for name in ("stride", "max_tokens", "trials"):
            require_int(name, getattr(self, name), minimum=1)
        require_int("seed", self.seed, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def lengths(self, train_length: int, *, perplexity: bool = True, passkey: bool = True) -> list[int]:
        """The sorted lengths (in tokens) the enabled evaluations need."""
        needed: set[int] = set()
        if perplexity:
            needed |= {int(m * train_length) for m in self.multiples}
        if passkey:
            needed |= {int(m * train_length) for m in self.passkey_multiples}
        return sorted(needed)


@dataclass
class SweepResult:
    """Rows of perplexity and passkey results plus the context they were measured in."""

    context: dict[str, Any]
    perplexity: list[dict[str, Any]] = field(default_factory=list)
    passkey: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "perplexity": self.perplexity,
            "passkey": self.passkey,
            "skipped": self.skipped,
        }

    def write(self, directory: Path) -> None:
        """``results.json`` plus ``perplexity.csv`` and ``passkey.csv`` in ``directory``.

        Every CSV row also carries the run's context (model, evaluation-text sha256, ropekit version), so rows
        from two runs can be compared without the JSON.
        """
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "results.json").write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        model = self.context.get("model") or {}
        run = {
            "model": model.get("name"),
            "model_kind": model.get("kind"),
            "eval_text_sha256": self.context.get("eval_text_sha256"),
            "ropekit_version": self.context.get("ropekit_version"),
        }
        for name, rows in (("perplexity", self.perplexity), ("passkey", self.passkey)):
            if not rows:
                continue
            flat = [
                {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in {**r, **run}.items()}
                for r in rows
            ]
            with (directory / f"{name}.csv").open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(flat[0]))
                writer.writeheader()
                writer.writerows(flat)


def evaluation_text(model: EvalModel) -> tuple[torch.Tensor, str]:
    """The shipped held-out text as the model's ids, and its sha256."""
    text = heldout_bytes()
    return model.encode(text), hashlib.sha256(text).hexdigest()


def run_sweep(
    model: EvalModel,
    settings: SweepSettings,
    *,
    perplexity: bool = True,
    passkey: bool = True,
    on_step: Callable[[str], None] | None = None,
) -> SweepResult:
    """Evaluate every method of ``settings`` on ``model``.

    Args:
        on_step: called with a short label after each (method, length) unit of work, for progress bars.
    """
    from ropekit import __version__

    ids, digest = evaluation_text(model)
    train_length = model.train_length
    context = {
        "ropekit_version": __version__,
        "model": model.describe(),
        "eval_text_sha256": digest,
        "eval_text_tokens": len(ids),
        "settings": settings.to_dict(),
        "train_length": train_length,
        "torch": torch.__version__,
    }
    result = SweepResult(context)
    lengths = [int(m * train_length) for m in settings.multiples]
    passkey_lengths = [int(m * train_length) for m in settings.passkey_multiples]
    filler = ids.numpy()
    encode = lambda text: model.encode(text).numpy()  # noqa: E731
    needed = settings.lengths(train_length, perplexity=perplexity, passkey=passkey)
    for method in settings.methods:
        for index, length in enumerate(needed):
            factor = factor_for(length, train_length, settings.factor)
            try:
                scaling = scaling_for(method, factor=factor, train_length=train_length, native=model.native_scaling)
                model.set_scaling(scaling)  # a model without RoPE refuses every scaling but 'none' (LookupError)
            except LookupError as error:
                result.skipped.append({"method": method, "reason": str(error)})
                for _ in needed[index:]:  # keep a progress bar's total exact
                    if on_step is not None:
                        on_step(f"{method} skipped")
                break
            run = {"method": method, "factor": factor, "scaling": describe_scaling(scaling)}
            if perplexity and length in lengths:
                point = perplexity_at(
                    model,
                    ids,
                    length,
                    train_length,
                    mode=settings.mode,
                    stride=settings.stride,
                    max_tokens=settings.max_tokens,
                )
                result.perplexity.append({**run, "mode": settings.mode, **point.to_dict()})
            if passkey and length in passkey_lengths:
                cells = passkey_grid(
                    model,
                    filler,
                    [length],
                    list(settings.depths),
                    trials=settings.trials,
                    seed=settings.seed,
                    encode=encode,
                )
                result.passkey.extend({**run, **cell.to_dict()} for cell in cells)
            if on_step is not None:
                on_step(f"{method} @ {length}")
        model.set_scaling(model.native_scaling)
    return result


def count_steps(settings: SweepSettings, train_length: int, *, perplexity: bool = True, passkey: bool = True) -> int:
    """Units of work :func:`run_sweep` reports through ``on_step`` (for a progress bar's total)."""
    return len(settings.methods) * len(settings.lengths(train_length, perplexity=perplexity, passkey=passkey))


def best_by_length(rows: list[dict[str, Any]], key: str = "perplexity") -> dict[int, tuple[str, float]]:
    """For each length, the method with the lowest ``key`` and its value."""
    best: dict[int, tuple[str, float]] = {}
    for row in rows:
        value = row[key]
        if value is None or not np.isfinite(value):
            continue
        if row["length"] not in best or value < best[row["length"]][1]:
            best[row["length"]] = (row["method"], value)
    return best
