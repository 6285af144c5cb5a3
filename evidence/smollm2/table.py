"""The SmolLM2 evidence table (attention methods and tasks) from the JSON files run_real.sh writes: the task suite's means and
effective lengths per method (RULER's 85.6% and relative to the model's own 1x score, with Wilson intervals),
niah_single_1 (RULER's passkey form) per length, and perplexity at 1x, 2x and 4x. A cell a run left out reads
"not run".

Task files of the same length from different seeds are pooled (their samples are different: a sample is a function
of seed, length, task and index). Usage: python evidence/smollm2/table.py [FOLDER] (default: this folder; e.g.
evidence/smollm2/gpu_h100 for the GPU run)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from ropekit.eval.tasks.run import summarise
from ropekit.eval.tasks.scoring import RULER_THRESHOLD, cell

HERE = Path(__file__).parent
TRAIN_LENGTH = 8192


def task_rows(folder: Path) -> list[dict]:
    pooled: dict[tuple, list[float]] = defaultdict(list)
    for path in sorted(folder.glob("tasks_*.json")):
        if not path.stat().st_size:  # still being written
            continue
        for row in json.loads(path.read_text())["rows"]:
            # a cell's mean × samples is its summed score (fractional scores count as partial successes)
            pooled[row["method"], row["length"], row["task"]] += [row["score"]] * row["samples"]
    return [{"method": m, "length": n, "task": t, **cell(s)} for (m, n, t), s in pooled.items()]


def pct(c: dict) -> str:
    low, high = c["ci95"]
    return f"{100 * c['score']:.0f}% [{100 * low:.0f}, {100 * high:.0f}] (n={c['samples']})"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    rows = task_rows(folder)
    summary = summarise(rows, TRAIN_LENGTH, RULER_THRESHOLD)
    lengths = sorted({r["length"] for r in rows})
    perplexity = {}
    for path in sorted(folder.glob("ppl_*.json")):
        if not path.stat().st_size:  # still being written
            continue
        for row in json.loads(path.read_text())["perplexity"]:
            beyond = f" (beyond {TRAIN_LENGTH:,}: {row['beyond']:.2f})" if row.get("beyond") else ""
            perplexity[row["method"], row["length"]] = f"{row['perplexity']:.2f}{beyond}"
    head = ["method"] + [f"tasks @ {n:,}" for n in lengths] + [f"niah_single_1 @ {n:,}" for n in lengths]
    head += [f"ppl @ {n:,}" for n in lengths] + ["effective length, all tasks", "effective length, learned tasks"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    means = {(m["method"], m["length"]): m for m in summary["means"] if m["subset"] == "all"}
    for method in dict.fromkeys(r["method"] for r in rows):
        line = [method] + [pct(means[method, n]) if (method, n) in means else "not run" for n in lengths]
        for n in lengths:
            cells = [r for r in rows if r["method"] == method and r["length"] == n and r["task"] == "niah_single_1"]
            line += [f"{round(c['score'] * c['samples'])}/{c['samples']}" for c in cells] or ["not run"]
        line += [perplexity.get((method, n), "—") for n in lengths]
        for subset in ("all", "learned"):
            eff = next(e for e in summary["effective"] if e["method"] == method and e["subset"] == subset)
            line.append(
                f"{subset}: {eff['effective_length']} {eff['interval']}; relative {eff['relative_effective_length']} "
                f"{eff['relative_interval']} (≥ {eff['relative_threshold']:.1f}%)"
            )
        print("| " + " | ".join(str(x) for x in line) + " |")
    print(f"\nnot learned at {TRAIN_LENGTH:,} (method none below 50%): {summary['not_learned']}")
    print("per task:")
    for r in sorted(rows, key=lambda r: (r["task"], r["length"], r["method"])):
        print(f"  {r['task']:16s} {r['length']:6d} {r['method']:12s} {pct(r)}")


if __name__ == "__main__":
    main()
