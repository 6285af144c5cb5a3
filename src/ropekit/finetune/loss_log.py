"""The loss log of a fine-tuning run: one row per optimizer step, as CSV (``loss.csv``) and a figure (``loss.png``)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StepRecord:
    """One row of the loss log."""

    step: int
    loss: float
    lr: float
    tokens: int
    seconds: float
    heldout_loss: float | None = None

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def write_loss_log(path: Path, log: list[StepRecord]) -> None:
    """The loss log as CSV: step, loss, lr, tokens, seconds, tokens_per_second, heldout_loss."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "loss", "lr", "tokens", "seconds", "tokens_per_second", "heldout_loss"])
        for r in log:
            heldout = "" if r.heldout_loss is None else f"{r.heldout_loss:.6f}"
            row = [r.step, f"{r.loss:.6f}", f"{r.lr:.6g}", r.tokens, f"{r.seconds:.3f}", f"{r.tokens_per_second:.1f}"]
            writer.writerow([*row, heldout])


def read_loss_log(path: Path) -> list[StepRecord]:
    """The rows :func:`write_loss_log` wrote."""
    with path.open() as handle:
        return [
            StepRecord(
                int(row["step"]),
                float(row["loss"]),
                float(row["lr"]),
                int(row["tokens"]),
                float(row["seconds"]),
                float(row["heldout_loss"]) if row["heldout_loss"] else None,
            )
            for row in csv.DictReader(handle)
        ]


def plot_loss(path: Path, log: list[StepRecord], title: str) -> None:
    """Training loss (steps >= 1) and held-out loss (step 0 = before training) against step, as a PNG."""
    from ropekit._plotting import pyplot

    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.5), layout="constrained")
    trained = [r for r in log if r.step > 0]
    axis.plot([r.step for r in trained], [r.loss for r in trained], label="training loss", linewidth=1)
    held = [r for r in log if r.heldout_loss is not None]
    if held:
        axis.plot([r.step for r in held], [r.heldout_loss for r in held], "o-", label="held-out loss")
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("cross-entropy (nats/token)")
    axis.set_title(title, fontsize=9)
    axis.legend()
    figure.savefig(path, dpi=120)
    plt.close(figure)
