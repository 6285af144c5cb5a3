"""The 2x (16k) task means of SmolLM2-135M with the corrected sample layout, per source and pooled, and which pairs
of methods their 95% Wilson intervals separate.

Sources (the same sample definition: the answer inside the length; samples are a function of seed, length, task
and index, so the seeds differ between sources and no sample is counted twice):
- CPU, float32, the torch path: ``sample_layout/tasks_16k_<method>[_seed<s>].json`` (run16k.sh, run16k_seeds.sh,
  run16k_more.sh);
- H100, bfloat16, the torch path: the 16k rows of ``gpu_h100/tasks_seed*.json``.

For a pair the intervals do not separate, the samples per (method, task) cell that would separate them if the
observed pooled rates held: the smallest n with Wilson intervals of 3n samples per mean (three tasks) disjoint.

python evidence/smollm2/sample_layout/table16k_pooled.py
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path

from ropekit.eval.passkey import wilson_interval
from ropekit.eval.tasks.scoring import samples_to_separate

HERE = Path(__file__).parent
LENGTH = 16384
METHODS = ("none", "yarn", "ntk", "self_extend")
TASKS = 3


def load() -> dict[str, dict[str, list[float]]]:
    """source → method → one score per sample."""
    out: dict[str, dict[str, list[float]]] = {"CPU float32": defaultdict(list), "H100 bfloat16": defaultdict(list)}
    sources = [("CPU float32", sorted(HERE.glob("tasks_16k_*.json"))),
               ("H100 bfloat16", sorted((HERE.parent / "gpu_h100").glob("tasks_seed*.json")))]  # fmt: skip
    for source, paths in sources:
        for path in paths:
            for row in json.loads(path.read_text())["rows"]:
                if row["length"] == LENGTH:
                    out[source][row["method"]] += [row["score"]] * row["samples"]
    return out


def interval(scores: list[float]) -> tuple[float, float, float]:
    n = len(scores)
    mean = sum(scores) / n
    return (mean, *wilson_interval(mean * n, n))


def fmt(scores: list[float]) -> str:
    if not scores:
        return "–"
    mean, low, high = interval(scores)
    return f"{sum(scores):g}/{len(scores)} = {100 * mean:.0f}% [{100 * low:.0f}, {100 * high:.0f}]"


def main() -> None:
    data = load()
    pooled = {m: data["CPU float32"][m] + data["H100 bfloat16"][m] for m in METHODS}
    print("| method | CPU float32 (torch) | H100 bfloat16 (torch) | pooled |")
    print("|---|---|---|---|")
    for m in METHODS:
        print(f"| {m} | {fmt(data['CPU float32'][m])} | {fmt(data['H100 bfloat16'][m])} | {fmt(pooled[m])} |")
    print("\n| pair | CPU float32 | H100 bfloat16 | pooled | samples per cell to separate at the pooled rates |")
    print("|---|---|---|---|---|")
    for a, b in itertools.combinations(METHODS, 2):
        line = [f"{a} / {b}"]
        for source in (data["CPU float32"], data["H100 bfloat16"], pooled):
            if not source[a] or not source[b]:
                line.append("–")
                continue
            (_, la, ha), (_, lb, hb) = interval(source[a]), interval(source[b])
            line.append("**separate**" if ha < lb or hb < la else "overlap")
        pa, pb = interval(pooled[a])[0], interval(pooled[b])[0]
        n = samples_to_separate(pa, pb, TASKS) if pa != pb else None
        line.append(f"{n} ({TASKS * n} per mean)" if n else "never (equal rates)" if pa == pb else "over 10,000")
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
