"""Mixed-window fine-tuning of the tiny model against the same fine-tune without mixed windows (docs/mixed_window.md).

Run from the repository root; the two fine-tunes may run at once, then the scoring:

    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train mixed
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train full
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train mixed 1   # a second seed (optional)
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train full 1
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train mixed 0 3e-4   # a gentler peak lr
    OMP_NUM_THREADS=1 nice -n 10 python evidence/mixed_window/run.py train full 0 3e-4
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
STEPS = ["--steps", "24", "--batch-size", "4", "--warmup-steps", "3"]
LR = "1e-3"
COMMON = ["train", "--init", "tiny", "--train-length", "1k", "--scaling", "longrope"]
COMMON += ["--factors", "evidence/mixed_window/long_factor.json", *STEPS, "--force", "--json"]
RUNS = {"mixed": ["--mixed-window"], "full": []}
NAMES = {"mixed": "mixed windows", "full": "full-length windows"}
LENGTHS = (256, 1024)


def name(kind: str, seed: int, lr: str = LR) -> str:
    return kind + ("" if seed == 0 else f"_s{seed}") + ("" if lr == LR else f"_lr{lr}")


def command(kind: str, seed: int, lr: str = LR) -> list[str]:
    out = f"runs/mixed_window_{name(kind, seed, lr)}"
    return ["ropekit", *COMMON, "--lr", lr, "--seed", str(seed), *RUNS[kind], "--out", out]


def train(kind: str, seed: int, lr: str = LR) -> None:
    Path("runs").mkdir(exist_ok=True)
    started = time.perf_counter()
    argv = command(kind, seed, lr)[1:]
    done = subprocess.run([sys.executable, "-m", "ropekit.cli", *argv], check=True, capture_output=True)
    summary = json.loads(done.stdout)
    record = {"command": " ".join(command(kind, seed, lr)), "wall_seconds": round(time.perf_counter() - started, 1)}
    record |= {k: summary[k] for k in ("steps", "tokens", "wall_time_s", "heldout_bpb")}
    record |= {"kind": kind, "seed": seed, "lr": lr}
    (HERE / f"train_{name(kind, seed, lr)}.json").write_text(json.dumps(record, indent=2) + "\n")


WINDOWS = 64


def window_bpb(model, length: int) -> list[float]:
    """Bits per byte of each of the first :data:`WINDOWS` non-overlapping held-out windows of ``length`` bytes."""
    import torch
    import torch.nn.functional as F

    from ropekit.model.corpus import heldout_bytes
    from ropekit.model.tiny import bits_per_byte
    from ropekit.model.tokenizer import byte_ids

    data = torch.from_numpy(byte_ids(heldout_bytes()))
    model.eval()
    values = []
    with torch.no_grad():
        for w in range(min(WINDOWS, (len(data) - 1) // length)):
            chunk = data[w * length : w * length + length + 1]
            values.append(bits_per_byte(F.cross_entropy(model(chunk[None, :-1])[0], chunk[1:]).item()))
    return values


def score(model) -> dict[str, object]:
    windows = {n: window_bpb(model, n) for n in LENGTHS}
    return {f"bpb@{n}": round(sum(v) / len(v), 4) for n, v in windows.items()} | {"_windows": windows}


def score_all() -> None:
    from ropekit.model.checkpoint import load
    from ropekit.scaling.longrope import LongRopeScaling

    source = load("tiny")
    rows = [{"model": "tiny as shipped (plain RoPE)", **score(source)}]
    long = tuple(json.loads((HERE / "long_factor.json").read_text()))
    spec = LongRopeScaling(
        short_factor=(1.0,) * len(long), long_factor=long, original_max_position_embeddings=256, factor=4.0
    )
    rows.append({"model": "tiny + longrope, training-free", **score(source.set_scaling(spec))})
    settings = [(0, LR), (1, LR), (0, "3e-4")]
    for seed, lr in settings:
        for kind, label in NAMES.items():
            record = HERE / f"train_{name(kind, seed, lr)}.json"
            if record.is_file():
                trained = json.loads(record.read_text())
                model = load(f"runs/mixed_window_{name(kind, seed, lr)}")
                rows.append({"model": f"fine-tuned, {label}, seed {seed}, lr {lr}", **score(model), "train": trained})
    paired = []  # mixed minus full-length, per window, same seed and lr: mean and a 95% interval over windows
    for seed, lr in settings:
        pair = [r for r in rows if r["model"].endswith(f"seed {seed}, lr {lr}")]
        if len(pair) == 2:
            for n in LENGTHS:
                d = [a - b for a, b in zip(pair[0]["_windows"][n], pair[1]["_windows"][n], strict=True)]
                mean = sum(d) / len(d)
                sd = (sum((x - mean) ** 2 for x in d) / (len(d) - 1)) ** 0.5
                half = 1.96 * sd / len(d) ** 0.5
                paired.append({"seed": seed, "lr": lr, "length": n, "windows": len(d), "mixed_minus_full_bpb": round(mean, 4),
                               "interval95": [round(mean - half, 4), round(mean + half, 4)]})  # fmt: skip
    for row in rows:
        row.pop("_windows")
    note = f"bits per byte on the shipped held-out text ({WINDOWS} non-overlapping windows per length)"
    result = {"note": note, "rows": rows, "paired": paired}
    (HERE / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0, sys.argv[4] if len(sys.argv) > 4 else LR)
    else:
        score_all()
