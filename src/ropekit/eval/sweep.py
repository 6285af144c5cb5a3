"""Per-method sweeps: perplexity against length and passkey accuracy for every method in a list.

Every result row carries the full description of its run (method and parameters, model, evaluation-text
hash, ropekit version) so two runs can be compared field by field.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ropekit._defaults import (
    PASSKEY_DEPTHS,
    PASSKEY_MULTIPLES,
    PASSKEY_TRIALS,
    PERPLEXITY_MAX_TOKENS,
    PERPLEXITY_MODE,
    PERPLEXITY_MULTIPLES,
    PERPLEXITY_STRIDE,
)
from ropekit._free_memory import available_memory
from ropekit._validate import require_choice, require_float, require_int
from ropekit.eval.methods import check_params
from ropekit.eval.parallel import ONE_PROCESS, Launched, OneProcess
from ropekit.eval.perplexity import MODES
from ropekit.eval.perplexity import perplexity_windows as perplexity_windows  # the sweep cost is said here too
from ropekit.eval.protocol import EvalModel
from ropekit.eval.text import TokenizedText, read_text, shipped_text, tokenize
from ropekit.integrations.hf.output_head import EVAL_CHUNK_BYTES


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """What to measure. Lengths are multiples of the training length; each is validated here.

    Raises:
        ValueError: no methods, a multiple <= 0, a depth outside [0, 1], ``factor`` neither ``"auto"`` nor >= 1,
            an unknown mode, or a count (``stride``, ``max_tokens``, ``trials``) < 1.
    """

    methods: tuple[str, ...]
    multiples: tuple[float, ...] = PERPLEXITY_MULTIPLES
    passkey_multiples: tuple[float, ...] = PASSKEY_MULTIPLES
    depths: tuple[float, ...] = PASSKEY_DEPTHS
    factor: float | str = "auto"
    mode: str = PERPLEXITY_MODE
    stride: int = PERPLEXITY_STRIDE
    max_tokens: int = PERPLEXITY_MAX_TOKENS
    trials: int = PASSKEY_TRIALS
    seed: int = 0
    #: parameters of the attention methods (``--param``); the ones not given are derived per length
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("methods must name at least one method, got none")
        check_params(self.methods, self.params)
        # store what the checks return (plain Python numbers), so numpy inputs still give a JSON-ready to_dict()
        checked: dict[str, Any] = {}
        for name in ("multiples", "passkey_multiples"):
            checked[name] = tuple(require_float(name, value, above=0.0) for value in getattr(self, name))
        checked["depths"] = tuple(require_float("depths", depth) for depth in self.depths)
        for depth in checked["depths"]:
            if not 0.0 <= depth <= 1.0:
                raise ValueError(f"depths must be in [0, 1] (0 = start of the filler), got {depth!r}")
        if self.factor != "auto":
            checked["factor"] = require_float("factor", self.factor, at_least=1.0)
        require_choice("mode", self.mode, MODES)
        for name in ("stride", "max_tokens", "trials"):
            checked[name] = require_int(name, getattr(self, name), minimum=1)
        checked["seed"] = require_int("seed", self.seed, minimum=0)
        for name, value in checked.items():
            object.__setattr__(self, name, value)

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
            "eval_text": self.context.get("eval_text"),
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


def evaluation_text(model: EvalModel, text: TokenizedText | None = None) -> tuple[torch.Tensor, str]:
    """The evaluation text as the model's ids (default: the shipped held-out text), and its sha256."""
    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    return tokens.ids, tokens.sha256


def needed_tokens(settings: SweepSettings, train_length: int, *, perplexity: bool = True, passkey: bool = True) -> int:
    """Tokens the evaluation text must hold for the longest length asked for (one window and its target)."""
    lengths = settings.lengths(train_length, perplexity=perplexity, passkey=passkey)
    return max(lengths, default=0) + 1


def forward_tokens(
    settings: SweepSettings, train_length: int, text_tokens: int, *, perplexity: bool = True, passkey: bool = True
) -> dict[int, int]:
    """Tokens the model body runs over, per length (all methods together): the cost of a sweep up front."""
    cost: dict[int, int] = {}
    methods = len(settings.methods)
    for length in settings.lengths(train_length, perplexity=perplexity, passkey=passkey):
        tokens = 0
        if perplexity and length in {int(m * train_length) for m in settings.multiples}:
            tokens += perplexity_windows(length, text_tokens, settings) * length
        if passkey and length in {int(m * train_length) for m in settings.passkey_multiples}:
            tokens += len(settings.depths) * settings.trials * (length - 1)
        cost[length] = tokens * methods
    return cost


def _context(model: EvalModel, tokens: TokenizedText, settings: SweepSettings) -> dict[str, Any]:
    """What a sweep ran on: ropekit and torch versions, the model, the evaluation text and the settings."""
    from ropekit import __version__

    return {
        "ropekit_version": __version__,
        "model": model.describe(),
        "eval_text": tokens.source,
        "eval_text_sha256": tokens.sha256,
        "eval_text_tokens": len(tokens.ids),
        "settings": settings.to_dict(),
        "train_length": model.train_length,
        "torch": torch.__version__,
    }


def run_sweep(
    model: EvalModel,
    settings: SweepSettings,
    *,
    perplexity: bool = True,
    passkey: bool = True,
    text: TokenizedText | None = None,
    on_step: Callable[[str], None] | None = None,
    on_tokens: Callable[[int], None] | None = None,
    processes: OneProcess | Launched = ONE_PROCESS,
) -> SweepResult:
    """Evaluate every method of ``settings`` on ``model``.

    Args:
        text: the evaluation text (default: the shipped held-out text); its source, sha256 and token count are
            recorded in the context and in every row.
        on_step: called with a short label after each (method, length) unit of work, for progress bars.
        on_tokens: called with the forward tokens of each finished unit (see :func:`forward_tokens`), for an ETA.
        processes: where the units are measured (:mod:`ropekit.eval.parallel`; default: all in this process). The
            result is the same, on every process.
    """
    from ropekit.eval.sweep_grid import add_rows, measure_units, sweep_units

    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    result = SweepResult(_context(model, tokens, settings))
    units, costs = sweep_units(settings, model.train_length, len(tokens.ids), perplexity=perplexity, passkey=passkey)
    outcomes = processes.map(
        costs,
        lambda mine: measure_units(model, settings, tokens, units, costs, mine, on_step=on_step, on_tokens=on_tokens),
    )
    add_rows(result, settings, units, outcomes)
    result.context["model"].update(model.ran_as())
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


class SweepText:
    """The evaluation text of a sweep: read (and checked) before any model loads, tokenized before its weights do.

    ``check`` is meant as ``load_eval_model(..., before_weights=text.check)``: it tokenizes the text with the
    model's tokenizer and refuses a text too short for the longest length asked for, before a transformers
    model's weights load.

    Raises:
        FileNotFoundError, ValueError: as :func:`ropekit.eval.text.read_text` (missing, empty, binary files).
    """

    def __init__(self, path: str | Path | None, settings: SweepSettings, *, perplexity: bool, passkey: bool) -> None:
        self.path = path
        self.text = read_text(path) if path is not None else shipped_text()
        self.settings = settings
        self.perplexity, self.passkey = perplexity, passkey
        self.tokens: TokenizedText | None = None

    def check(self, model: EvalModel) -> None:
        """Tokenize for ``model``; a user's text must cover the longest length asked for.

        Raises:
            ValueError: the text has too few tokens (names the source, the count and what would fit).
        """
        train = model.train_length
        needed = needed_tokens(self.settings, train, perplexity=self.perplexity, passkey=self.passkey)
        if self.path is not None and self.text.nbytes + len(self.text.documents) * len(model.separator) < needed:
            raise ValueError(  # every token covers at least one byte: too short without tokenizing
                f"text {self.text.source!r} has {self.text.nbytes:,} bytes, fewer than the {needed:,} tokens the "
                f"longest length asked for needs (training length {train})"
            )
        self.tokens = tokenize(self.text, model.encode, model.separator)
        if self.path is not None and self.tokens.tokens < needed:
            raise ValueError(
                f"text {self.text.source!r} has {self.tokens.tokens:,} tokens; the longest length asked for needs "
                f"{needed:,} (training length {train}; the largest multiple that fits is "
                f"{(self.tokens.tokens - 1) // train})"
            )

    def tokenized(self, model: EvalModel) -> TokenizedText:
        """The text as ``model``'s token ids (tokenized now if ``check`` has not run)."""
        if self.tokens is None:
            self.tokens = tokenize(self.text, model.encode, model.separator)
        return self.tokens


def peak_memory_estimate(model: EvalModel, length: int, batch: int = 1) -> int | None:
    """Bytes a forward pass over ``(batch, length)`` tokens needs (weights, one layer's activations, the residual
    stream and one chunk of logits); ``None`` when the model's shape is not known. An estimate for a warning, not a
    guarantee: attention that falls back to materialising ``(seq × seq)`` scores needs more."""
    describe = model.describe()
    sizes = model.layer_sizes()
    if sizes is None or not describe.get("parameters"):
        return None
    hidden, ffn = sizes
    width = {"float32": 4, "bfloat16": 2, "float16": 2}.get(describe.get("dtype", "float32"), 4)
    weights = describe["parameters"] * width
    per_token = (4 * hidden + 3 * ffn + 3 * hidden) * width  # residual, norms, q/k/v/o, MLP up/gate/act
    logits = 3 * EVAL_CHUNK_BYTES
    return weights + batch * length * per_token + logits


def cost_lines(
    model: EvalModel, settings: SweepSettings, text_tokens: int, *, perplexity: bool = True, passkey: bool = True
) -> list[str]:
    """What a sweep will cost, said before it starts: forward tokens per length, and a warning where the longest
    length is predicted not to fit in memory."""
    cost = forward_tokens(settings, model.train_length, text_tokens, perplexity=perplexity, passkey=passkey)
    total = sum(cost.values())
    per_length = ", ".join(f"{length:,}: {tokens:,}" for length, tokens in sorted(cost.items()))
    lines = [f"forward tokens: {total:,} over {len(settings.methods)} method(s) (per length: {per_length})"]
    if cost:
        longest = max(cost)
        needed, free = peak_memory_estimate(model, longest), available_memory(model.device())
        if needed is not None and free is not None and needed > free:
            lines.append(
                f"warning: length {longest:,} needs about {needed / 2**30:.1f} GiB, but only {free / 2**30:.1f} GiB "
                "is free: it will probably run out of memory (ask for shorter lengths, a smaller dtype, or "
                "device_map='auto')"
            )
    return lines
