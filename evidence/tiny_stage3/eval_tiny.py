"""Tasks at 1x (method none) of a tiny checkpoint: python eval_tiny.py DIR [SAMPLES [SEED]] (defaults 20, 0)."""

import sys
import time

from ropekit.eval.models import TinyEvalModel
from ropekit.eval.tasks.run import TaskSettings, run_tasks

samples = int(sys.argv[2]) if len(sys.argv) > 2 else 20
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
t = time.time()
r = run_tasks(TinyEvalModel(sys.argv[1]), TaskSettings(methods=("none",), samples=samples, multiples=(1,), seed=seed))
scores = {row["task"]: row["score"] for row in r.rows}
learned = [s for s in scores.values() if s >= 0.5]
print(sys.argv[1], f"samples {samples} seed {seed}:", " ".join(f"{k}={100 * v:.0f}" for k, v in scores.items()))
print(
    f"mean all {100 * sum(scores.values()) / len(scores):.1f}  "
    f"learned {100 * sum(learned) / len(learned):.1f} (n={len(learned)})  {time.time() - t:.0f}s"
)
