"""SmolLM2-135M on all 11 tasks, with the samples that re-tokenise whole (``run.sh``'s JSON files): per task and
per method the successes over the samples at 8k (1x: every method is the plain model, so ``none`` stands for all)
and at 16k (2x), each with its engine; then the means over the 11 tasks with 95% Wilson intervals, which pairs of
methods the 16k means separate, and for the pairs they do not, the samples per (method, task) cell that would
separate them if the observed rates held (the smallest n with the Wilson intervals of k·n samples disjoint, k the
tasks of a 16k mean).

Files of the same (length, method) from different seeds are pooled: a sample is a function of (seed, length, task,
index), so no sample counts twice. Usage: python evidence/smollm2/all_tasks/table.py [FOLDER]
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

from ropekit.eval.passkey import wilson_interval
from ropekit.eval.tasks.scoring import samples_to_separate

HERE = Path(__file__).parent
METHODS = ("none", "yarn", "ntk", "self_extend")
COLUMNS = [(8192, "none")] + [(16384, m) for m in METHODS]


def load(folder: Path) -> tuple[dict, dict, dict]:
    """(length, method) → task → scores; (length, method) → engines; (length, method) → seeds."""
    scores: dict = defaultdict(lambda: defaultdict(list))
    engines: dict = defaultdict(set)
    seeds: dict = defaultdict(set)
    for path in sorted(folder.glob("tasks_*.json")):
        data = json.loads(path.read_text())
        for row in data["rows"]:
            key = (row["length"], row["method"])
            scores[key][row["task"]] += [row["score"]] * row["samples"]
            context = data.get("context", {})
            engines[key].add(context.get("engine", {}).get("name", "torch") if isinstance(context.get("engine"), dict)
                             else context.get("engine", "torch"))  # fmt: skip
            seeds[key].add(context["settings"]["seed"])
    return scores, engines, seeds


def interval(values: list[float]) -> tuple[float, float, float]:
    mean = sum(values) / len(values)
    return (mean, *wilson_interval(mean * len(values), len(values)))


def pct(values: list[float]) -> str:
    if not values:
        return "not run"
    mean, low, high = interval(values)
    return f"{100 * mean:.0f}% [{100 * low:.0f}, {100 * high:.0f}] (n={len(values)})"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    scores, engines, seeds = load(folder)
    columns = [c for c in COLUMNS if c in scores]
    tasks = list(dict.fromkeys(t for c in columns for t in scores[c]))
    print("| task | " + " | ".join(f"{m} @ {n:,}" for n, m in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for task in tasks:
        cells = [scores[c].get(task, []) for c in columns]
        print(f"| {task} | " + " | ".join(f"{sum(v):g}/{len(v)}" if v else "–" for v in cells) + " |")
    means = {c: [s for t in tasks for s in scores[c].get(t, [])] for c in columns}
    print("| **mean, 95% Wilson** | " + " | ".join(pct(means[c]) for c in columns) + " |")
    print("| engine | " + " | ".join(", ".join(sorted(engines[c])) for c in columns) + " |")
    print("| seeds | " + " | ".join(", ".join(map(str, sorted(seeds[c]))) for c in columns) + " |")
    at16 = [m for n, m in columns if n == 16384]
    if len(at16) < 2:
        return
    asked = len({t for m in at16 for t in scores[16384, m]})  # the tasks of a 16k mean (those learned at 8k)
    print(f"\n| pair at 16,384 ({asked} task(s) per mean) | intervals | samples per cell to separate at these rates |")
    print("|---|---|---|")
    for a, b in itertools.combinations(at16, 2):
        (pa, la, ha), (pb, lb, hb) = interval(means[16384, a]), interval(means[16384, b])
        apart = "**separate**" if ha < lb or hb < la else "overlap"
        n = samples_to_separate(pa, pb, asked) if pa != pb else None
        more = f"{n} ({asked * n} per mean)" if n else "never (equal rates)" if pa == pb else "over 10,000"
        print(f"| {a} / {b} | {apart} | {more} |")


if __name__ == "__main__":
    main()
