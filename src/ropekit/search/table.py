"""The final table of a search: the searched factors, every seed formula written as ``longrope`` factors, and every
formula as its own method, on the held-out kinds (never scored during the search), with intervals, and which wins.

Per row: the mean held-out needle loss (nats per answer token, each sample weighing the same) with its bootstrap
interval; retrieval accuracy (the whole answer greedy-decoded right) with its Wilson interval; the 1x perplexity
change on held-out plain-text windows of L0 tokens with its bootstrap interval; the paired difference of its
needle loss minus the searched factors', per sample, with its bootstrap interval (above 0: the search is better);
and the mean per kind. ``short_floor`` is the 1x change of longrope's attention factor alone on the same windows (what
every engine derives from s; no factor list of that s costs less); ``short_tolerance`` the total 1x change the search
allowed (the floor included). The verdict says which row wins and whether the search beats YaRN and its best seed
formula with intervals that separate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ropekit.eval.bootstrap import bootstrap_interval, paired_interval
from ropekit.eval.passkey import wilson_interval
from ropekit.search.objective import longrope_of, sample_scores, window_losses
from ropekit.search.space import Candidate, seed_candidates

#: the name of the searched factors' row; a seed formula written as longrope factors is ``longrope[<name>]``
SEARCHED = "searched"


def measure_factors(prepared, factors: list[float]) -> dict[str, np.ndarray]:
    """One row of :func:`measured_rows` for a factor list written as ``longrope`` (as the search writes it)."""
    spec = longrope_of(
        factors, original_length=prepared.original_length, factor=prepared.factor, switch=prepared.request.switch
    )
    return _measure(prepared, lambda: prepared.model.set_scaling(spec))


def _measure(prepared, setup: Callable[[], None]) -> dict[str, np.ndarray]:
    setup()
    losses, correct = sample_scores(prepared.model, prepared.heldout, batch_size=prepared.request.batch_size)
    windows = prepared.heldout_short
    return {
        "losses": losses,
        "correct": correct,
        "short": window_losses(prepared.model, windows.ids, batch_size=windows.batch_size) - windows.plain,
    }


def measured_rows(
    prepared, best: Candidate, extra: Mapping[str, list[float]] | None = None, *, processes: Any = None
) -> dict[str, dict]:
    """Per row, the per-sample held-out losses and hits and the per-window 1x loss changes: the searched factors,
    each seed formula exactly as its formula gives it (whatever the search's form), ``extra`` factor lists (name →
    factors, e.g. an earlier search's), then each formula of :data:`ropekit.search.run.FORMULAS` as its own method
    (a method the model cannot run is left out). The rows are shared among ``processes``
    (:mod:`ropekit.eval.parallel`; ``None``: this one), every process getting all of them."""
    from ropekit.eval.parallel import ONE_PROCESS
    from ropekit.search.run import FORMULAS

    lists = {SEARCHED: best.factors}
    seeds = seed_candidates(prepared.model.rope, prepared.original_length, prepared.factor)
    lists.update({f"longrope[{name}]": seed.factors for name, seed in seeds.items()})
    lists.update(dict(extra or {}))
    units: list[tuple[str, list[float] | None]] = [*lists.items(), *((method, None) for method in FORMULAS)]

    def run(indices: list[int]) -> list[dict[str, np.ndarray] | None]:
        return [_row(prepared, *units[i]) for i in indices]

    measured = (processes or ONE_PROCESS).map([1] * len(units), run)
    return {name: row for (name, _), row in zip(units, measured, strict=True) if row is not None}


def _row(prepared, name: str, factors: list[float] | None) -> dict[str, np.ndarray] | None:
    """A factor list's row, or formula ``name``'s as its own method (``None``: the model cannot run it)."""
    from ropekit.eval.methods import configure, restore

    if factors is not None:
        return measure_factors(prepared, factors)
    options = {"length": prepared.target_length, "train_length": prepared.original_length, "params": {}}
    try:
        return _measure(prepared, lambda: configure(prepared.model, name, factor=prepared.factor, **options))
    except LookupError:
        return None
    finally:
        restore(prepared.model, name)


def summarize(rows: Mapping[str, Mapping[str, np.ndarray]], kinds: tuple[str, ...]) -> dict[str, Any]:
    """The table (JSON-ready) from :func:`measured_rows`' per-sample values: per row its numbers with intervals,
    ordered by held-out needle loss; ``winner``; and ``verdict``, the lines that say it plainly."""
    searched = rows[SEARCHED]["losses"]
    table = {}
    for name, row in sorted(rows.items(), key=lambda item: float(item[1]["losses"].mean())):
        difference, interval = paired_interval(row["losses"], searched)
        hits = int(row["correct"].sum())
        table[name] = {
            "loss": float(row["losses"].mean()),
            "loss_ci95": list(bootstrap_interval(row["losses"])),
            "accuracy": hits / len(row["correct"]),
            "accuracy_ci95": list(wilson_interval(hits, len(row["correct"]))),
            "short_change": math.expm1(float(row["short"].mean())),
            "short_change_ci95": [math.expm1(v) for v in bootstrap_interval(row["short"])],
            "minus_searched": {"difference": difference, "ci95": list(interval)},
            "by_kind": {
                kind: float(np.mean([v for v, k in zip(row["losses"], kinds, strict=True) if k == kind]))
                for kind in dict.fromkeys(kinds)
            },
        }
    return {"rows": table, "winner": next(iter(table)), "verdict": verdict(table)}


def _compare(table: dict[str, Any], name: str) -> str:
    low, high = table[name]["minus_searched"]["ci95"]
    difference = table[name]["minus_searched"]["difference"]
    said = "the search is better" if low > 0 else ("the search is worse" if high < 0 else "not separated")
    return f"{name} minus searched: {difference:+.4g} [{low:+.4g}, {high:+.4g}] nats: {said}"


def verdict(table: dict[str, Any]) -> list[str]:
    """The plain lines: the winner, the search against YaRN and against its best seed formula (paired 95%
    intervals), and a warning when a seed formula beats the search with separated intervals."""
    winner = next(iter(table))
    lines = [f"held-out winner: {winner} ({table[winner]['loss']:.4g} nats per answer token)"]
    if "yarn" in table:
        lines.append(_compare(table, "yarn"))
    seeds = [name for name in table if name.startswith("longrope[")]
    if seeds:
        best_seed = seeds[0]  # the table is ordered by held-out loss
        lines.append(_compare(table, best_seed).replace(best_seed, f"best seed {best_seed}", 1))
        beaten = [name for name in seeds if table[name]["minus_searched"]["ci95"][1] < 0]
        if beaten:
            lines.append(f"warning: {', '.join(beaten)} beat the searched factors on held-out kinds; prefer them")
    return lines


def final_table(
    prepared, best: Candidate, extra: Mapping[str, list[float]] | None = None, *, processes: Any = None
) -> dict[str, Any]:
    """:func:`summarize` of :func:`measured_rows` on the prepared held-out samples, with the held-out kinds."""
    table = summarize(measured_rows(prepared, best, extra, processes=processes), prepared.heldout.kinds)
    return {
        "kinds": sorted(set(prepared.heldout.kinds)),
        "samples": len(prepared.heldout.kinds),
        "windows": len(prepared.heldout_short.ids),
        "short_floor": math.expm1(prepared.heldout_short.floor),
        "short_tolerance": prepared.request.short_tolerance,
        **table,
    }
