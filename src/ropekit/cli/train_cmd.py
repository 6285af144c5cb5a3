"""``ropekit train``: train the tiny reference model on the stdlib corpus with passkey episodes mixed in."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ropekit.cli.common import fail


def train_command(
    out: Path = typer.Option(Path("runs/tiny"), help="Checkpoint directory (resumed if it holds a train_state)."),
    minutes: float | None = typer.Option(None, help="Time budget; the LR schedule follows it and training stops."),
    steps: int = typer.Option(4000, help="Maximum optimizer steps."),
    batch_size: int = typer.Option(16, help="Sequences per step."),
    lr: float = typer.Option(3e-3, help="Peak learning rate (AdamW)."),
    seed: int = typer.Option(0, help="Seed for weights and the data order."),
    d_model: int = typer.Option(128, help="Model width."),
    n_layers: int = typer.Option(4, help="Decoder blocks."),
    n_heads: int = typer.Option(4, help="Query heads (head_dim = d_model / n_heads)."),
    n_kv_heads: int = typer.Option(2, help="Key/value heads (GQA)."),
    ffn_dim: int = typer.Option(384, help="SwiGLU hidden size."),
    train_length: int = typer.Option(256, help="Training context in bytes."),
    position: str = typer.Option("rope", help="rope, sinusoidal or none (NoPE)."),
    rope_base: float = typer.Option(10000.0, help="RoPE base b."),
    task_fraction: float = typer.Option(0.2, help="Fraction of sequences that are passkey episodes."),
    resume: bool = typer.Option(True, help="Continue from a train_state in --out if present."),
) -> None:
    """Train the tiny model (deterministic data order, periodic checkpoints, resumable)."""
    from rich.console import Console

    from ropekit.model.tiny import TinyConfig
    from ropekit.model.train import TrainConfig, train

    try:
        config = TinyConfig(
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
            ffn_dim=ffn_dim,
            train_length=train_length,
            position=position,
            rope_base=rope_base,
        )
        settings = TrainConfig(
            steps=steps, batch_size=batch_size, lr=lr, seed=seed, minutes=minutes, task_fraction=task_fraction
        )
    except (TypeError, ValueError) as error:
        raise fail(str(error)) from error
    command = "ropekit train " + " ".join(sys.argv[2:])
    summary = train(config, settings, out, resume=resume, command=command)
    Console().print(
        f"[bold]done[/]: {summary['steps']} steps, {summary['tokens']:,} tokens, {summary['wall_time_s']:.0f} s, "
        f"{summary['parameters']:,} parameters, held-out {summary['heldout_bpb']:.3f} bits/byte → {out}"
    )
