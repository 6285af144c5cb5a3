"""The PoSE before/after table on SmolLM2-135M, 8k -> 32k, from the JSON files of run_pose32k.sh and run_real.sh.

Rows: the original model (none), YaRN s = 4 training-free (at 8k with --factor 4, at 32k the factor is 4 by
length), and YaRN s = 4 after each PoSE run of run_pose32k.sh (one row per finetune_32k_<steps>.json: the fine-tuned
folder, with its own scaling). Columns per length: perplexity on one window of the shipped held-out text (the same
tokens in every row; ppl_after16_32k.json's 8k row averages four windows and is replaced by ppl_after16_8k.json's
one), niah_single_1 (RULER's passkey form) and the mean over the three tasks (niah_single_1, niah_single_3,
niah_multikey_1), with the samples stated. A cell no run produced reads "not run".
Usage: python evidence/smollm2/pose/table_32k.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent
LENGTHS = (8192, 32768)
#: row label -> (method name in the files, the files that hold its cells; a later file's cell wins)
ROWS = {
    "original (none)": ("none", ["tasks_8k.json", "ppl_1x.json", "ppl_4x_none.json"]),
    "YaRN s = 4, training-free": (
        "yarn",
        ["pose/tasks_yarn4_8k.json", "pose/ppl_yarn4_8k.json", "tasks_32k_yarn.json", "ppl_4x_yarn.json"],
    ),
}
for run in sorted(HERE.glob("finetune_32k_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1])):
    steps = run.stem.rsplit("_", 1)[1]
    ROWS[f"YaRN s = 4 + PoSE, {steps} steps"] = (
        "native",
        [f"pose/tasks_after{steps}.json", f"pose/ppl_after{steps}_32k.json", f"pose/ppl_after{steps}_8k.json"],
    )


def load(name: str) -> dict:
    path = ROOT / name
    return json.loads(path.read_text()) if path.is_file() and path.stat().st_size else {}


def main() -> None:
    head = ["model"] + [f"{what} @ {n:,}" for n in LENGTHS for what in ("ppl", "passkey form", "tasks")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label, (method, files) in ROWS.items():
        ppl, single, tasks = {}, {}, {}
        for name in files:
            data = load(name)
            for row in data.get("perplexity", []):
                if row["method"] == method and row["length"] in LENGTHS:
                    ppl[row["length"]] = f"{row['perplexity']:.2f}"
            for row in data.get("rows", []):
                if row["method"] == method and row["length"] in LENGTHS:
                    tasks.setdefault(row["length"], []).append(row)
                    if row["task"] == "niah_single_1":
                        single[row["length"]] = f"{round(row['score'] * row['samples'])}/{row['samples']}"
        line = [label]
        for n in LENGTHS:
            rows = tasks.get(n, [])
            total = sum(r["score"] * r["samples"] for r in rows)
            count = sum(r["samples"] for r in rows)
            mean = f"{100 * total / count:.0f}% (n={count})" if count else "not run"
            line += [ppl.get(n, "not run"), single.get(n, "not run"), mean]
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
