"""Mixed-window fine-tuning of the tiny model against the same fine-tune without mixed windows (docs/mixed_window.md).

Run from the repository root; the two fine-tunes may run at once, then the scoring:

    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train mixed
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train full
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py score   # → evidence/mixed_window/results.json

Both runs start from the bundled tiny model (trained at 256 bytes) and train 24 steps of 4 rows at 1024 bytes (4×)
with the same ``longrope`` long list (YaRN's per-pair factors at s = 4, long_factor.json) and the same seed; one
with ``--mixed-window``. Each model is scored in bits per byte on the shipped held-out text at 256 (1×, short-context
retention) and at 1024 (the target), beside the tiny model as shipped and with the longrope config training-free.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
STEPS = ["--steps", "24", "--batch-size", "4", "--lr", "1e-3", "--warmup", "3", "--seed", "0"]
COMMON = ["train", "--init", "tiny", "--train-length", "1k", "--scaling", "longrope"]
COMMON += ["--factors", "evidence/mixed_window/long_factor.json", *STEPS, "--force", "--json"]
RUNS = {"mixed": ["--mixed-window"], "full": []}
NAMES = {"mixed": "mixed windows", "full": "full-length windows"}
LENGTHS = (256, 1024)


def command(kind: str) -> list[str]:
    return ["ropekit", *COMMON, *RUNS[kind], "--out", f"runs/mixed_window_{kind}"]


def train(kind: str) -> None:
    Path("runs").mkdir(exist_ok=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ropekit.cli", *command(kind)[1:]], check=True, capture_output=True)
    summary = json.loads(done.stdout)
    record = {"command": " ".join(command(kind)), "wall_seconds": round(time.perf_counter() - started, 1)}
    record |= {k: summary[k] for k in ("steps", "tokens", "wall_time_s", "heldout_bpb")}
    (HERE / f"train_{kind}.json").write_text(json.dumps(record, indent=2) + "\n")


def score(model) -> dict[str, float]:
    from ropekit.model.train import heldout_bpb

    return {f"bpb@{n}": round(heldout_bpb(model, n, max_windows=24), 4) for n in LENGTHS}


def score_all() -> None:
    from ropekit.model.checkpoint import load
    from ropekit.scaling.longrope import LongRopeScaling

    source = load("tiny")
    rows = [{"model": "tiny as shipped (plain RoPE)", **score(source)}]
    long = tuple(json.loads((HERE / "long_factor.json").read_text()))
    spec = LongRopeScaling(short_factor=(1.0,) * len(long), long_factor=long, original_max_position_embeddings=256, factor=4.0)
    rows.append({"model": "tiny + longrope, training-free", **score(source.set_scaling(spec))})
    for kind, name in NAMES.items():
        trained = json.loads((HERE / f"train_{kind}.json").read_text())
        rows.append({"model": f"fine-tuned, {name}", **score(load(f"runs/mixed_window_{kind}")), "train": trained})
    note = "bits per byte on the shipped held-out text (24 non-overlapping windows per length)"
    (HERE / "results.json").write_text(json.dumps({"note": note, "rows": rows}, indent=2) + "\n")
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2])
    else:
        score_all()
