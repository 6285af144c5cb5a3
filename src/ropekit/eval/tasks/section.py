"""The report's task section: a task × length heatmap per method, the mean per length, and the effective lengths.

Tasks the model did not learn (below 50% at its own training length) are named as such, not shown as zeros among
the rest: the means and effective lengths are given over all tasks (RULER's definition) and over the learned ones.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ropekit.eval.tasks.limits import LEARNED, NOLIMA_SHARE
from ropekit.eval.tasks.run import TaskResult


def task_figure(rows: list[dict[str, Any]], not_learned: list[str], path: Path) -> Path:
    """One heatmap per method: mean score per (task × length); tasks not learned are grey cells saying so."""
    from ropekit.eval.figures import method_heatmaps

    tasks = list(dict.fromkeys(r["task"] for r in rows))
    return method_heatmaps(
        # no score to read where the model cannot do the task even at its own length
        [{**r, "score": float("nan")} if r["task"] in not_learned else r for r in rows],
        path,
        row_key="task",
        row_values=tasks,
        row_labels=tasks,
        value_key="score",
        colorbar="score (string_match_all)",
        cols=3,
        panel=(3.6, 0.3 * len(tasks) + 1.2),
        missing="not learned",
    )


def _length(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def task_findings(result: TaskResult) -> list[str]:
    """Plain-words lines: which tasks were not learned, and each method's effective length
    (:func:`effective_length_findings`)."""
    summary = result.summary()
    train = result.context["train_length"]
    lines = [f"Not judged: {summary['note']}."] if "note" in summary else []
    if summary["not_learned"]:
        lines.append(
            f"Tasks not learned by this model (below {LEARNED:.0%} at its training length {train}): "
            f"{', '.join(summary['not_learned'])}; they are left out of the 'learned tasks' means."
        )
    return lines + effective_length_findings(result)


def effective_length_findings(result: TaskResult) -> list[str]:
    """One plain-words line per method and task subset: its effective length (and the relative one)."""
    summary = result.summary()
    train = result.context["train_length"]
    lines = []
    for row in summary["effective"]:
        if row["subset"] == "learned" and not summary["not_learned"]:
            continue  # the same as all tasks
        relative = (
            f"; relative to the model's own score at {train} (>= {row['relative_threshold']:.1f}%): "
            f"{_length(row['relative_effective_length'])}"
            if "relative_threshold" in row
            else ""
        )
        short = (
            f"; relative to its own score at the shortest length (NoLiMa: >= {row['short_relative_threshold']:.1f}%): "
            f"{_length(row['short_relative_effective_length'])}"
            if "short_relative_threshold" in row
            else ""
        )
        lines.append(
            f"Effective length with {row['method']} ({row['subset']} tasks, mean >= {row['threshold']:g}%): "
            f"{_length(row['effective_length'])}{relative}{short}."
        )
    return lines + twin_findings(summary.get("twins", []))


def _percent(cell: dict[str, Any], key: str = "score") -> str:
    return f"{100 * cell[key]:.0f}% [{100 * cell['ci95'][0]:.0f}, {100 * cell['ci95'][1]:.0f}]"


def twin_findings(twins: list[dict[str, Any]]) -> list[str]:
    """One line per (method, length) with twin questions: the tasks' own score, the twin's, and the gap."""
    lines = []
    for row in twins:
        gap = row["gap"]
        lines.append(
            f"{row['method']} at {row['length']:,} ({', '.join(row['tasks'])}): {_percent(row['own'])} against "
            f"{_percent(row[row['twin']])} for the {row['twin']} twin; {row['twin']} − own = "
            f"{100 * gap['difference']:+.0f} points [{100 * gap['ci95'][0]:+.0f}, {100 * gap['ci95'][1]:+.0f}] "
            f"over {gap['pairs']} pairs."
        )
    return lines


def task_section(result: TaskResult, out: Path) -> list[str]:
    """HTML parts of the section (writes ``tasks.json`` and ``tasks.png`` into ``out``)."""
    result.write(out)
    summary = result.summary()
    if result.rows:
        task_figure(result.rows, summary["not_learned"] or [], out / "tasks.png")
    settings = result.context["settings"]
    depth = "random depths" if settings["depth"] is None else f"depth {settings['depth']}"
    parts = [
        "<h2>RULER-style tasks and the effective length</h2>",
        f"<p>{settings['samples']} samples per (method, length, task), seed {settings['seed']}, needles at {depth}; "
        f"tasks: {html.escape(', '.join(settings['tasks']))} (RULER's synthetic tasks; its QA tasks need downloads "
        "and are left out). Greedy answers scored with string_match_all; intervals are 95% Wilson intervals. The "
        f"effective length is the longest length whose mean score (and every shorter one's) is at least "
        f"{settings['threshold']:g}%; the relative one uses {settings['threshold']:g}% of the model's own score at its "
        "training length; NoLiMa's uses "
        f"{NOLIMA_SHARE:g}% of the method's own score at the shortest length.</p>",
    ]
    if "note" in summary:
        parts.append(f"<p>Not judged: {html.escape(summary['note'])}.</p>")
    if summary["not_learned"]:
        parts.append(
            f"<p>Not learned by this model (below {LEARNED:.0%} at its training length, so no length can show what an "
            f"extension buys on them): {html.escape(', '.join(summary['not_learned']))}.</p>"
        )
    dropped = result.context.get("dropped") or {}
    if dropped:
        parts.append(
            "<p>Left out (they do not fit the shortest length): "
            + "; ".join(html.escape(f"{task}: {why}") for task, why in dropped.items())
            + ".</p>"
        )
    if result.rows:
        parts.append("<img src='tasks.png' alt='task heatmaps'>")
    lengths = sorted({m["length"] for m in summary["means"]})
    head = "".join(f"<th>{n:,}</th>" for n in lengths)
    body = []
    for row in summary["effective"]:
        cells = {
            m["length"]: m for m in summary["means"] if m["method"] == row["method"] and m["subset"] == row["subset"]
        }
        means = "".join(
            f"<td>{100 * cells[n]['score']:.1f} [{100 * cells[n]['ci95'][0]:.0f}, {100 * cells[n]['ci95'][1]:.0f}]</td>"
            if n in cells
            else "<td></td>"
            for n in lengths
        )
        low, high = row["interval"]
        rel_low, rel_high = row.get("relative_interval", [None, None])
        short_low, short_high = row.get("short_relative_interval", [None, None])
        body.append(
            f"<tr><td>{html.escape(row['method'])}</td><td>{row['subset']}</td>{means}"
            f"<td>{_length(row['effective_length'])} [{_length(low)}, {_length(high)}]</td>"
            f"<td>{_length(row.get('relative_effective_length'))} [{_length(rel_low)}, {_length(rel_high)}]</td>"
            f"<td>{_length(row.get('short_relative_effective_length'))} [{_length(short_low)}, {_length(short_high)}]"
            "</td></tr>"
        )
    parts.append(
        "<table><thead><tr><th>method</th><th>tasks</th>"
        + head
        + "<th>effective length [95%]</th><th>relative effective length [95%]</th>"
        f"<th>relative to the shortest length, NoLiMa's {NOLIMA_SHARE:g}% [95%]</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
    )
    parts += twin_table(summary.get("twins", []))
    if result.skipped:
        parts.append(
            "<p>Skipped: " + "; ".join(html.escape(f"{s['method']} ({s['reason']})") for s in result.skipped) + "</p>"
        )
    parts.append("<p>Raw data: <a href='tasks.json'>tasks.json</a>.</p>")
    return parts


def twin_table(twins: list[dict[str, Any]]) -> list[str]:
    """The report's table of twin questions (latent against literal): per method and length, both scores and the
    gap with its paired 95% interval."""
    if not twins:
        return []
    body = "".join(
        f"<tr><td>{html.escape(row['method'])}</td><td>{row['length']:,}</td>"
        f"<td>{html.escape(', '.join(row['tasks']))}</td><td>{_percent(row['own'])}</td>"
        f"<td>{html.escape(row['twin'])} {_percent(row[row['twin']])}</td>"
        f"<td>{100 * row['gap']['difference']:+.0f} [{100 * row['gap']['ci95'][0]:+.0f}, "
        f"{100 * row['gap']['ci95'][1]:+.0f}]</td></tr>"
        for row in twins
    )
    return [
        "<h3>Latent against literal</h3>",
        "<p>The latent-hop questions reach their needle only through bridge facts; each has a literal twin on the same "
        "context that names the needle's key word. The gap (twin − own, in points) has Newcombe's paired 95% "
        "interval.</p>",
        "<table><thead><tr><th>method</th><th>length</th><th>tasks</th><th>own (latent)</th><th>twin</th>"
        f"<th>twin − own</th></tr></thead><tbody>{body}</tbody></table>",
    ]
