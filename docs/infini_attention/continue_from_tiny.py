"""Continued training from the bundled tiny model with another attention (the paper's continual pre-training).

The bundled RoPE model's weights go into an Infini-attention model (every weight has the same name and shape;
the gates ``β`` are new and start at 0) or a NoPE model (RoPE has no weights), and training continues with the
bundled model's recipe (same data, task mix, batch, schedule) for a time budget.

Usage (the runs in docs/infini_attention.md):

    OMP_NUM_THREADS=1 python docs/infini_attention/continue_from_tiny.py --position infini --out runs/infini-tiny
    OMP_NUM_THREADS=1 python docs/infini_attention/continue_from_tiny.py --position none --out runs/nope-tiny
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

from ropekit.model import TinyLM, load, save
from ropekit.model.train import TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--position", choices=("infini", "none"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--memory-update", default="delta")
    parser.add_argument("--task-fraction", type=float, default=0.2)
    parser.add_argument("--start", default="tiny", help="checkpoint to start from (default: the bundled model)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tiny = load(args.start)
    extra = {"segment_length": args.segment_length, "memory_update": args.memory_update}
    config = dataclasses.replace(
        tiny.config, position=args.position, **(extra if args.position == "infini" else {"segment_length": None})
    )
    model = TinyLM(config)
    missing, unexpected = model.load_state_dict(tiny.state_dict(), strict=False)
    if unexpected or any(not k.endswith("attn.gate") for k in missing):
        raise ValueError(f"weights do not carry over: missing {missing}, unexpected {unexpected}")
    start = args.out.with_name(args.out.name + "-init")
    save(model, start, metadata={"from": args.start, "new": missing})
    settings = TrainConfig(steps=100000, lr=args.lr, minutes=args.minutes, task_fraction=args.task_fraction)
    command = "python docs/infini_attention/continue_from_tiny.py " + " ".join(sys.argv[1:])
    summary = train(config, settings, args.out, init=start, command=command, progress=False)
    print({k: v for k, v in summary.items() if k != "history"})


if __name__ == "__main__":
    main()
