"""The sweep's grid: one unit per (method, length) of perplexity and per (method, length, depth) of passkey, measured
unit by unit, and the rows they make.

A unit's row depends only on the unit (the model is set up for its method and length alone; a passkey cell's
episodes are seeded by (seed, length, depth)), so any subset of units can be measured in any process
(:mod:`ropekit.eval.parallel`) and the rows put back in unit order are those of one process measuring them all. A
length's perplexity windows stay one unit: their losses are summed in window order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ropekit.eval.methods import configured_groups
from ropekit.eval.passkey import passkey_grid
from ropekit.eval.perplexity import perplexity_at, perplexity_windows

if TYPE_CHECKING:
    from ropekit.eval.protocol import EvalModel
    from ropekit.eval.sweep import SweepSettings
    from ropekit.eval.text import TokenizedText

#: (method, length, "perplexity" or "passkey", depth or None)
Unit = tuple[str, int, str, float | None]


def sweep_units(
    settings: SweepSettings, train_length: int, text_tokens: int, *, perplexity: bool, passkey: bool
) -> tuple[list[Unit], list[int]]:
    """Every unit of the sweep in the order one process measures them, and each one's forward tokens."""
    lengths = {int(m * train_length) for m in settings.multiples} if perplexity else set()
    passkey_lengths = {int(m * train_length) for m in settings.passkey_multiples} if passkey else set()
    units: list[Unit] = []
    costs: list[int] = []
    for method in settings.methods:
        for length in settings.lengths(train_length, perplexity=perplexity, passkey=passkey):
            if length in lengths:
                units.append((method, length, "perplexity", None))
                costs.append(perplexity_windows(length, text_tokens, settings) * length)
            if length in passkey_lengths:
                for depth in settings.depths:
                    units.append((method, length, "passkey", depth))
                    costs.append(settings.trials * (length - 1))
    return units, costs


def _measure(model: EvalModel, settings: SweepSettings, tokens: TokenizedText, unit: Unit) -> dict[str, Any]:
    """The row fields one unit measures (perplexity at its length, or its passkey cell)."""
    _, length, kind, depth = unit
    ids = tokens.ids
    if kind == "perplexity":
        point = perplexity_at(
            model,
            ids,
            length,
            model.train_length,
            mode=settings.mode,
            stride=settings.stride,
            max_tokens=settings.max_tokens,
        )
        return {"mode": settings.mode, **point.to_dict()}
    encode = lambda text: model.encode(text).numpy()  # noqa: E731
    cells = passkey_grid(
        model, ids.numpy(), [length], [depth], trials=settings.trials, seed=settings.seed, encode=encode
    )
    return cells[0].to_dict()


def measure_units(
    model: EvalModel,
    settings: SweepSettings,
    tokens: TokenizedText,
    units: list[Unit],
    costs: list[int],
    indices: list[int],
    *,
    on_step: Callable[[str], None] | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """The outcomes of ``units[i]`` for each ``i`` of ``indices`` (ascending): ``{"row": ...}``, or
    ``{"skipped": reason}`` for a method that cannot run on ``model`` (its later lengths are then not tried).
    ``on_tokens`` gets each unit's forward tokens, ``on_step`` a label after each (method, length)."""
    outcomes: list[dict[str, Any]] = []
    with configured_groups(model, units, indices, settings) as groups:
        for method, length, chunk, described, skipped in groups:
            for i in chunk:
                if skipped is not None:
                    outcomes.append({"skipped": skipped})
                else:
                    run = {"method": method, **described, "eval_text_sha256": tokens.sha256}
                    run["eval_text_tokens"] = len(tokens.ids)
                    outcomes.append({"row": {**run, **_measure(model, settings, tokens, units[i])}})
                if on_tokens is not None:
                    on_tokens(costs[i])
            if on_step is not None:
                on_step(f"{method} {'skipped' if skipped is not None else '@ ' + str(length)}")
    return outcomes


def add_rows(result: Any, settings: SweepSettings, units: list[Unit], outcomes: list[dict[str, Any]]) -> None:
    """The perplexity and passkey rows from every unit's outcome, into ``result`` (its ``perplexity``, ``passkey``
    and ``skipped``), in unit order; a method skipped at a length has no rows from there on."""
    for method, group in itertools.groupby(zip(units, outcomes, strict=True), key=lambda pair: pair[0][0]):
        for _, pairs in itertools.groupby(group, key=lambda pair: pair[0][1]):
            pairs = list(pairs)
            if "skipped" in pairs[0][1]:
                result.skipped.append({"method": method, "reason": pairs[0][1]["skipped"]})
                break
            for unit, outcome in pairs:
                (result.perplexity if unit[2] == "perplexity" else result.passkey).append(outcome["row"])
