"""Mixed-window fine-tuning of the tiny model against the same fine-tune without mixed windows (docs/mixed_window.md).

Run from the repository root (it writes evidence/mixed_window/results.json and the two runs under runs/):

    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py

Both runs start from the bundled tiny model (trained at 256 bytes) and train 40 steps at 1024 bytes (4×) with the same
``longrope`` long list (YaRN's per-pair factors at s = 4, long_factor.json) and the same seed; one with
``--mixed-window``. Each model is scored in bits per byte on the shipped held-out text at 256 (1×, short-context
retention) and at 1024 (the target), beside the tiny model as shipped and with the longrope config training-free.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
STEPS = ["--steps", "40", "--batch-size", "8", "--lr", "1e-3", "--warmup", "4", "--seed", "0"]
COMMON = ["train", "--init", "tiny", "--train-length", "1k", "--scaling", "longrope"]
COMMON += ["--factors", "evidence/mixed_window/long_factor.json", *STEPS, "--force"]
RUNS = {"mixed windows": ["--mixed-window"], "full-length windows": []}
LENGTHS = (256, 1024)


def score(model) -> dict[str, float]:
    from ropekit.model.train import heldout_bpb

    return {f"bpb@{n}": round(heldout_bpb(model, n, max_windows=24), 4) for n in LENGTHS}


def main() -> None:
    from ropekit.model.checkpoint import load

    rows, commands = [], {}
    source = load("tiny")
    rows.append({"model": "tiny as shipped (plain RoPE)", **score(source)})
    long = json.loads((HERE / "long_factor.json").read_text())
    from ropekit.scaling.longrope import LongRopeScaling

    spec = LongRopeScaling(
        short_factor=(1.0,) * len(long), long_factor=tuple(long), original_max_position_embeddings=256, factor=4.0
    )
    rows.append({"model": "tiny + longrope, training-free", **score(source.set_scaling(spec))})
    for name, extra in RUNS.items():
        out = Path("runs") / ("mixed_window_" + ("mixed" if extra else "full"))
        out.parent.mkdir(exist_ok=True)
        command = ["ropekit", *COMMON, *extra, "--out", str(out)]
        commands[name] = " ".join(command)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ropekit.cli", *command[1:]], check=True)
        seconds = round(time.perf_counter() - started, 1)
        rows.append({"model": f"fine-tuned, {name}", "train_seconds": seconds, **score(load(out))})
        print(rows[-1], flush=True)
    result = {"commands": commands, "rows": rows, "note": "bits per byte on the shipped held-out text, 24 windows"}
    (HERE / "results.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
