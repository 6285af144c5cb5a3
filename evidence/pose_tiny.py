"""PoSE's central claim at tiny scale : the bundled tiny model (trained at 256) extended to 1024.

Three models, all with YaRN s = 4 (original length 256):

* **(a) full**: fine-tuned on windows of 1024 tokens (positions 0 … 1023);
* **(b) pose**: fine-tuned on windows of 256 tokens whose PoSE position ids (:mod:`ropekit.finetune.pose`, 2
  chunks) span [0, 1024); 4× the rows per step, so (a) and (b) train on the same number of tokens;
* **(c) free**: YaRN s = 4 training-free.

Training uses ropekit's tiny-model data (:func:`ropekit.model.train.make_batch`: stdlib code with 20% passkey
episodes, as the model was trained), AdamW (β 0.9/0.95, no decay), ``--lr`` after 5 warm-up steps. Reported:
held-out bits per byte at 256 and 1024 (non-overlapping windows of the shipped held-out text; mean and 95% interval
over windows), passkey at 256 and 1024 (5 depths × ``--trials``; Wilson 95% interval), and each run's compute
(trained tokens, wall seconds, attention score FLOPs ∝ rows × window²).

Usage::

    nice -n 15 python evidence/pose_tiny.py --steps 60 --batch 2 --trials 8
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

ORIGINAL, TARGET, WINDOW = 256, 1024, 256


def train_run(kind: str, steps: int, batch: int, lr: float, corpus: np.ndarray, scaling) -> tuple:
    """Fine-tune the tiny model; ``kind`` is ``full`` (rows of 1024) or ``pose`` (4× rows of 256, PoSE ids)."""
    from ropekit.finetune.pose import PoseSettings
    from ropekit.model import load
    from ropekit.model.train import TrainConfig, make_batch

    torch.manual_seed(0)
    model = load("tiny").set_scaling(scaling).train()
    rows, length = (batch, TARGET) if kind == "full" else (batch * TARGET // WINDOW, WINDOW)
    config = dataclasses.replace(model.config, train_length=length)
    data = TrainConfig(steps=steps, batch_size=rows, lr=lr, warmup_steps=5, seed=1)
    pose = PoseSettings(window=WINDOW, target_length=TARGET, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    start, losses = time.perf_counter(), []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 5)
        ids = make_batch(corpus, config, data, step)  # (rows, length + 1)
        positions = pose.batch(torch.arange(step * rows, (step + 1) * rows)) if kind == "pose" else None
        logits = model(ids[:, :-1], positions)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    compute = {
        "trained_tokens": steps * rows * length,
        "seconds": round(seconds, 1),
        "attention_scores_per_step": rows * length * length,
        "final_loss_bpb": float(np.mean(losses[-5:]) / math.log(2)),
    }
    return model.eval(), compute


@torch.no_grad()
def bits_per_byte(model, data: torch.Tensor, length: int, windows: int) -> dict:
    """Mean bits per byte over non-overlapping windows of ``length``, with a 95% normal interval over windows."""
    count = min(windows, (len(data) - 1) // length)
    values = []
    for w in range(count):
        chunk = data[w * length : w * length + length + 1]
        loss = F.cross_entropy(model(chunk[None, :-1])[0], chunk[1:])
        values.append(loss.item() / math.log(2))
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = 1.96 * sd / math.sqrt(count)
    return {"bpb": mean, "low": mean - half, "high": mean + half, "windows": count}


def passkey(evaluator, filler: np.ndarray, length: int, trials: int) -> dict:
    from ropekit.eval.passkey import passkey_grid, wilson_interval

    cells = passkey_grid(evaluator, filler, [length], [0.1, 0.3, 0.5, 0.7, 0.9], trials=trials, batch_size=4)
    correct, total = sum(c.correct for c in cells), sum(c.trials for c in cells)
    low, high = wilson_interval(correct, total)
    return {"correct": correct, "trials": total, "low": low, "high": high}


def _cell(value: dict) -> str:
    if "bpb" in value:
        return f"{value['bpb']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"
    return f"{value['correct']}/{value['trials']} [{value['low']:.2f}, {value['high']:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=2, help="rows of 1024 per step for (a); (b) has 4× rows of 256")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--trials", type=int, default=8, help="passkey trials per depth (5 depths)")
    parser.add_argument("--windows", type=int, default=32, help="held-out windows per length")
    args = parser.parse_args()

    from ropekit.eval.models import TinyEvalModel
    from ropekit.model.corpus import build_training_bytes, heldout_bytes
    from ropekit.model.tokenizer import byte_ids
    from ropekit.scaling import YarnScaling

    scaling = YarnScaling(factor=TARGET / ORIGINAL, original_max_position_embeddings=ORIGINAL)
    corpus, _ = build_training_bytes()
    heldout = byte_ids(heldout_bytes())
    data = torch.from_numpy(heldout)
    evaluator = TinyEvalModel("tiny")
    evaluator.set_scaling(scaling)
    models = {"(c) YaRN s=4 training-free": (evaluator.model.eval(), {"trained_tokens": 0})}
    for label, kind in (("(a) full-length 1024", "full"), ("(b) PoSE W=256", "pose")):
        models[label] = train_run(kind, args.steps, args.batch, args.lr, corpus, scaling)
        print(f"trained {label}: {models[label][1]}", flush=True)
    rows = []
    for label, (model, compute) in models.items():
        evaluator.model = model
        row = {"model": label, "compute": compute}
        for length in (ORIGINAL, TARGET):
            row[f"bpb@{length}"] = bits_per_byte(model, data, length, args.windows)
            row[f"passkey@{length}"] = passkey(evaluator, heldout, length, args.trials)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"| model | bpb @ {ORIGINAL} | bpb @ {TARGET} | passkey @ {ORIGINAL} | passkey @ {TARGET} | compute |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        cell = lambda key, row=row: _cell(row[key])  # noqa: E731
        compute = row["compute"]
        spent = (
            f"{compute['trained_tokens']:,} tokens, {compute['seconds']} s, "
            f"{compute['attention_scores_per_step']:,} scores/step"
            if compute["trained_tokens"]
            else "none"
        )
        print(
            f"| {row['model']} | {cell(f'bpb@{ORIGINAL}')} | {cell(f'bpb@{TARGET}')} | "
            f"{cell(f'passkey@{ORIGINAL}')} | {cell(f'passkey@{TARGET}')} | {spent} |"
        )


if __name__ == "__main__":
    main()
