"""The report's summary: one table (method × measure) and one verdict line.

The table holds, per method, what a reader compares first: perplexity at the longest length evaluated, passkey
accuracy there, and, when the task suite ran, the effective length (RULER's absolute threshold, the one relative
to the model's own score at its training length, and NoLiMa's, relative to the method's own score at the shortest
length, each with the range its 95% intervals allow). The verdict names the
method that keeps the most effective length, by how much over the next one, and whether the intervals separate them.
Without the task suite the verdict falls back to passkey, then to perplexity, and says which measure it used.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["summary_table", "verdict"]


def _at_longest(rows: list[dict[str, Any]], key: str) -> tuple[int | None, dict[str, float]]:
    """The longest length in ``rows`` and each method's mean ``key`` there (NaN and None left out)."""
    if not rows:
        return None, {}
    longest = max(r["length"] for r in rows)
    values: dict[str, list[float]] = {}
    for r in rows:
        v = r.get(key)
        if r["length"] == longest and v is not None and math.isfinite(v):
            values.setdefault(r["method"], []).append(float(v))
    return longest, {m: sum(v) / len(v) for m, v in values.items()}


def _effective(tasks_summary: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per method, the effective-length row over all tasks (RULER's convention)."""
    if not tasks_summary:
        return {}
    return {row["method"]: row for row in tasks_summary["effective"] if row["subset"] == "all"}


def _length_cell(value: int | None, interval: list[int | None] | None) -> str:
    text = "—" if value is None else f"{value:,}"
    if interval and interval != [value, value]:
        low, high = ("—" if n is None else f"{n:,}" for n in interval)
        text += f" [{low}, {high}]"
    return text


def summary_table(
    perplexity: list[dict[str, Any]], passkey: list[dict[str, Any]], tasks_summary: dict[str, Any] | None
) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns and rows of the summary table; one row per method, in the order the methods were evaluated."""
    ppl_len, ppl = _at_longest(perplexity, "perplexity")
    key_len, key = _at_longest(passkey, "accuracy")
    effective = _effective(tasks_summary)
    methods = list(dict.fromkeys([r["method"] for r in perplexity] + [r["method"] for r in passkey] + list(effective)))
    columns = ["method"]
    if ppl_len is not None:
        columns.append(f"perplexity at {ppl_len:,}")
    if key_len is not None:
        columns.append(f"passkey at {key_len:,}")
    if effective:
        columns += [
            "effective length (tasks)",
            "relative effective length (tasks)",
            "relative to the shortest length (tasks, NoLiMa)",
        ]
    rows = []
    for method in methods:
        row: dict[str, Any] = {"method": method}
        if ppl_len is not None:
            row[columns[1]] = f"{ppl[method]:.3g}" if method in ppl else "—"
        if key_len is not None:
            row[f"passkey at {key_len:,}"] = f"{key[method]:.0%}" if method in key else "—"
        if effective:
            e = effective.get(method, {})
            row["effective length (tasks)"] = _length_cell(e.get("effective_length"), e.get("interval"))
            row["relative effective length (tasks)"] = _length_cell(
                e.get("relative_effective_length"), e.get("relative_interval")
            )
            row["relative to the shortest length (tasks, NoLiMa)"] = _length_cell(
                e.get("short_relative_effective_length"), e.get("short_relative_interval")
            )
        rows.append(row)
    return columns, rows


def interval_key(key: str) -> str:
    """The interval field of an effective-length field."""
    return "relative_interval" if key == "relative_effective_length" else "interval"


def _task_verdict(effective: dict[str, dict[str, Any]], train_length: int) -> str | None:
    key = "relative_effective_length"
    if not any(e.get(key) is not None for e in effective.values()):
        key = "effective_length"
    ranked = sorted(effective.values(), key=lambda e: e.get(key) or 0, reverse=True)
    best = ranked[0]
    if not best.get(key):
        return None
    kind = "relative effective length" if key == "relative_effective_length" else "effective length"
    interval = best.get(interval_key(key)) or [None, None]
    line = (
        f"{best['method']} keeps the longest {kind} on the tasks: {best[key]:,} tokens "
        f"({best[key] / train_length:g}× the training length)"
    )
    if len(ranked) == 1:
        return line + "."
    runner = ranked[1]
    runner_value = runner.get(key) or 0
    if runner_value == best[key]:
        return line + f", tied with {runner['method']}."
    if not runner_value:
        return line + "; no other method has one."
    ratio = f"{best[key] / runner_value:g}×"
    tied = [e["method"] for e in ranked[1:] if (e.get(key) or 0) == runner_value]
    runner_name = runner["method"] if len(tied) == 1 else ", ".join(tied)
    sure = (interval[0] or 0) > max(
        (e.get(interval_key(key)) or [0, 0])[1] or 0 for e in ranked[1:] if e["method"] in tied
    )
    how_sure = (
        "the 95% intervals separate them"
        if sure
        else "their 95% intervals overlap, so more samples would be needed to call it"
    )
    return line + f", {ratio} the next best, {runner_name} ({runner_value:,}); {how_sure}."


def verdict(
    perplexity: list[dict[str, Any]],
    passkey: list[dict[str, Any]],
    tasks_summary: dict[str, Any] | None,
    train_length: int,
) -> str:
    """One line: which method keeps the most, by how much, how sure, and on which measure."""
    effective = _effective(tasks_summary)
    if effective:
        line = _task_verdict(effective, train_length)
        if line:
            return line
    key_len, key = _at_longest(passkey, "accuracy")
    if key:
        ranked = sorted(key.items(), key=lambda kv: kv[1], reverse=True)
        line = f"On passkey at {key_len:,} tokens {ranked[0][0]} scores highest ({ranked[0][1]:.0%})"
        if len(ranked) > 1:
            line += f"; next {ranked[1][0]} ({ranked[1][1]:.0%})"
        return line + "."
    ppl_len, ppl = _at_longest(perplexity, "perplexity")
    if ppl:
        ranked = sorted(ppl.items(), key=lambda kv: kv[1])
        line = f"At {ppl_len:,} tokens {ranked[0][0]} has the lowest perplexity ({ranked[0][1]:.3g})"
        if len(ranked) > 1:
            line += f"; next {ranked[1][0]} ({ranked[1][1]:.3g}, {ranked[1][1] / ranked[0][1]:.2f}× higher)"
        return line + "."
    return "No method was evaluated."
