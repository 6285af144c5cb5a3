import sys, time
from ropekit.eval.models import TinyEvalModel
from ropekit.eval.tasks.run import run_tasks, TaskSettings
t = time.time()
r = run_tasks(TinyEvalModel(sys.argv[1]), TaskSettings(methods=('none',), samples=20, multiples=(1,)))
rows = r.rows
scores = {row['task']: row['score'] for row in rows}
learned = [s for s in scores.values() if s >= 0.5]
print(sys.argv[1], ' '.join(f"{k}={100*v:.0f}" for k, v in scores.items()))
print(f"mean all {100*sum(scores.values())/len(scores):.1f}  learned {100*sum(learned)/len(learned):.1f} (n={len(learned)})  {time.time()-t:.0f}s")
