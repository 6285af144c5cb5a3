"""Old against corrected sample layout at 16k (2x) for yarn and self_extend, seeds 0-2, one sample per (task, seed).

python evidence/smollm2/sample_layout/table16k.py   (after run16k.sh and run16k_seeds.sh)
"""

import json
from pathlib import Path

from ropekit.eval.tasks.scoring import cell

OLD, NEW = Path("evidence/smollm2"), Path("evidence/smollm2/sample_layout")
print("| method | layout | seed 0 | seed 1 | seed 2 | mean (9 samples) |")
print("|---|---|---|---|---|---|")
for method in ("yarn", "self_extend"):
    for layout in ("old layout", "corrected layout"):
        scores, per_seed = [], []
        for seed in (0, 1, 2):
            suffix = "" if seed == 0 else f"_seed{seed}"
            if layout.startswith("old"):
                rows = json.loads((OLD / f"tasks_16k{suffix}.json").read_text())["rows"]
                rows = [r for r in rows if r["method"] == method]
            else:
                rows = json.loads((NEW / f"tasks_16k_{method}{suffix}.json").read_text())["rows"]
            got = [r["score"] for r in rows]
            scores += got
            per_seed.append(f"{sum(got):g}/{len(got)}")
        c = cell(scores)
        print(
            f"| {method} | {layout} | {' | '.join(per_seed)} | {100 * c['score']:.0f}% "
            f"[{100 * c['ci95'][0]:.0f}, {100 * c['ci95'][1]:.0f}] |"
        )
