"""Ship stage 3 of the tiny model: python evidence/tiny_stage3/ship.py FINAL_RUN (run once, from the repository root).

Stage 3 is three continued runs, each from the one before: runs/tiny_tasks3 (from stage 2, the bundled model then),
runs/tiny_tasks4a, then FINAL_RUN. Copies FINAL_RUN's weights into src/ropekit/data/tiny/, keeps the metadata of
every earlier stage in its config.json (stage 2's, with stage 1's inside it, as ``stage2``; the first two runs of
stage 3 as ``stage3_runs``) and moves each run's training history to docs/tiny_model_history.json (``stage3``).
"""

import json
import re
import shutil
import sys
from pathlib import Path


def read(path):
    return json.loads(Path(path).read_text())


PYTHON = (
    'OMP_NUM_THREADS=1 python -c "from ropekit.model import load; from ropekit.model.train import TrainConfig, train; '
)
COMMON = "steps=100000, warmup_steps=50, task_fraction=0.6, answer_weight=10.0, task_mix='suite', checkpoint_every=500"
WEIGHTS = (
    "{'niah_single_1': 0.5, 'niah_single_2': 0.5, 'niah_single_3': 0.5, 'niah_multikey_3': 0.5, "
    "'niah_multivalue': 2, 'niah_multiquery': 2, 'vt': 3, 'cwe': 1.5, 'fwe': 3}"
)
COMMANDS = {
    "runs/tiny_tasks3": f"{PYTHON}train(load('tiny').config, TrainConfig(minutes=25, lr=1e-3, seed=3, {COMMON}), "
    "'runs/tiny_tasks3', init='tiny')\"  # init: stage 2, the bundled model then",
    "runs/tiny_tasks4a": f"{PYTHON}train(load('tiny').config, TrainConfig(minutes=40, lr=1e-3, seed=5, {COMMON}), "
    "'runs/tiny_tasks4a', init='evidence/tiny_stage3')\"  # = runs/tiny_tasks3's weights",
    "runs/tiny_tasks5a": f"{PYTHON}train(load('tiny').config, TrainConfig(minutes=40, lr=1e-3, seed=7, {COMMON}), "
    "'runs/tiny_tasks5a', init='runs/tiny_tasks4a')\"",
    "runs/tiny_tasks5b": f"{PYTHON}train(load('tiny').config, TrainConfig(minutes=40, lr=1e-3, seed=8, "
    f"task_weights={WEIGHTS}, {COMMON}), 'runs/tiny_tasks5b', init='runs/tiny_tasks4a')\"",
}

final = sys.argv[1].rstrip("/")
chain = ["runs/tiny_tasks3", "runs/tiny_tasks4a", final]
shipped_cfg = "src/ropekit/data/tiny/config.json"
stage2 = read(shipped_cfg)["metadata"]
history_file = stage2.pop("history_file")
history = read(history_file)
runs = []
for run, init in zip(chain, ["stage 2 (the bundled model then)", *chain[:-1]], strict=True):
    metadata = read(f"{run}/config.json")["metadata"]
    runs.append({"run": run, "init": init, "command": COMMANDS[run], "history": metadata.pop("history")})
    metadata["command"], metadata["init"] = COMMANDS[run], init
    runs[-1]["metadata"] = metadata
final_cfg = read(f"{final}/config.json")
final_cfg["metadata"] = {
    **runs[-1]["metadata"],
    "stage3_runs": [r["metadata"] for r in runs[:-1]],
    "stage2": stage2,
    "history_file": history_file,
}
history["stage3"] = [{k: r[k] for k in ("run", "init", "command", "history")} for r in runs]
shutil.copy(f"{final}/model.safetensors", "src/ropekit/data/tiny/model.safetensors")
Path(shipped_cfg).write_text(json.dumps(final_cfg, indent=2) + "\n")
text = json.dumps(history, indent=1)  # then one history record per line, as the file has always been written
text = re.sub(r"\{\n\s+(\"step\"[^{}]*?)\n\s+\}", lambda m: "{" + re.sub(r",\n\s+", ", ", m.group(1)) + "}", text)
Path(history_file).write_text(re.sub(r"(?m)^ +\{\"step\"", ' {"step"', text) + "\n")
print("shipped", final, "steps", [r["metadata"]["steps"] for r in runs], "bpb", final_cfg["metadata"]["heldout_bpb"])
