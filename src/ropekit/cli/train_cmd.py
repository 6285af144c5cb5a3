"""``ropekit train``: train the tiny reference model on the stdlib corpus with task sequences mixed in."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ropekit.cli.common import (
    fail,
    json_option,
    option_errors,
    parse_length,
    prepare_output_dir,
    print_json,
)

DEFAULT_OUT = Path("runs/tiny")
#: the TinyConfig and TrainConfig fields this command sets (an error about one names its option)
_TINY_FIELDS = (
    "d_model",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "ffn_dim",
    "position",
    "segment_length",
    "memory_update",
)
_TRAIN_FIELDS = (
    "steps",
    "batch_size",
    "lr",
    "warmup_steps",
    "seed",
    "minutes",
    "task_fraction",
    "task_mix",
    "answer_weight",
    "task_weights",
    "mixed_window",
)

#: the options whose declarations do not fit on one line
OUT = typer.Option(DEFAULT_OUT, "--out", "-o", help="Checkpoint directory (resumed if it holds a train_state).")
TASK_MIX = typer.Option(
    "passkey",
    help="What the task sequences are: passkey (episodes only) or suite (a quarter passkey, the rest "
    "the RULER-style tasks of `ropekit eval tasks`).",
)
TASK_WEIGHTS = typer.Option(
    None,
    help="With --task-mix suite: relative task weights, e.g. vt=2,fwe=2 (a task not named weighs 1; default: uniform).",
)
INIT = typer.Option(
    None, help="Start from this checkpoint's weights (a directory, or tiny for the bundled model); same shape."
)
SCALING = typer.Option(
    None, "--scaling", help="RoPE scaling to train with, e.g. longrope (lists from --param or --factors) or yarn."
)
FACTORS = typer.Option(None, "--factors", help="JSON file with per-pair factors (a list) for --scaling longrope.")
PARAM = typer.Option(None, "--param", help="Another field of the scaling, NAME=VALUE (repeatable), as `frequencies`.")
ORIGINAL = typer.Option(
    None, "--original-length", help="The length --scaling extends from (default: --init's training length, else 256)."
)
MIXED = typer.Option(
    False,
    "--mixed-window",
    metavar="",
    help="LongRoPE2: half the rows packed from pieces ≤ L0 (positions reset, short list; equal lists: the original "
    "RoPE), the rest full-length (long list); needs --scaling longrope.",
)
FORCE = typer.Option(
    False,
    "--force",
    metavar="",
    help="Replace the checkpoint files (config.json, model.safetensors, train_state.*) in an --out that holds "
    "no run to resume; other files there are left alone.",
)


def train_command(
    out: Path = OUT,
    minutes: float | None = typer.Option(None, help="Time budget; the LR schedule follows it and training stops."),
    steps: int = typer.Option(4000, help="Maximum optimizer steps."),
    batch_size: int = typer.Option(16, help="Sequences per step."),
    lr: float = typer.Option(3e-3, help="Peak learning rate (AdamW)."),
    warmup_steps: int = typer.Option(100, help="Linear warm-up steps."),
    seed: int = typer.Option(0, help="Seed for weights and the data order."),
    d_model: int = typer.Option(128, help="Model width."),
    n_layers: int = typer.Option(4, help="Decoder blocks."),
    n_heads: int = typer.Option(4, help="Query heads (head_dim = d_model / n_heads)."),
    n_kv_heads: int = typer.Option(2, help="Key/value heads (GQA)."),
    ffn_dim: int = typer.Option(384, help="SwiGLU hidden size."),
    train_length: str = typer.Option("256", help="Training context in bytes, e.g. 256 or 1k."),
    position: str = typer.Option("rope", help="rope, sinusoidal, none (NoPE) or infini (Infini-attention)."),
    base: float = typer.Option(10000.0, "--base", help="RoPE base b."),
    segment_length: int | None = typer.Option(None, help="Infini-attention segment length (position infini)."),
    memory_update: str = typer.Option("linear", help="Infini-attention memory rule: linear or delta."),
    task_fraction: float = typer.Option(0.2, help="Fraction of sequences that are task sequences."),
    task_mix: str = TASK_MIX,
    answer_weight: float = typer.Option(1.0, help="Loss weight of answer tokens relative to the rest (1: plain LM)."),
    task_weights: str | None = TASK_WEIGHTS,
    init: str | None = INIT,
    scaling: str | None = SCALING,
    factor: float | None = typer.Option(None, "--factor", help="--scaling factor (default: --train-length / L0)."),
    factors: Path | None = FACTORS,
    param: list[str] | None = PARAM,
    original_length: str | None = ORIGINAL,
    mixed_window: bool = MIXED,
    resume: bool = typer.Option(True, metavar="", help="Continue from a train_state in --out if present."),
    force: bool = FORCE,
    json_output: bool = json_option("Print the run's summary as JSON (the progress bar goes to stderr)."),
) -> None:
    """Train the tiny model (deterministic data order, periodic checkpoints, resumable).

    Every option is checked (by TinyConfig and TrainConfig, whose defaults these are) before any work.
    """

    from ropekit.model.train import check_train_out, train

    config, settings = _configs(locals())
    prepare_output_dir(out, "--out", default=DEFAULT_OUT, create=False)  # train() makes it once --init is checked
    command = "ropekit train " + " ".join(sys.argv[2:])
    with option_errors(
        device="--device",
        init="--init",
        out="--out",
        force="--force",
        mixed_window="--mixed-window",
        scaling="--scaling",
    ):
        check_train_out(out, resume=resume, force=force)
        summary = train(config, settings, out, resume=resume, command=command, init=init, force=force)
    if json_output:
        print_json({**summary, "out": str(out)})
        return
    _print_done(summary, out)


def _configs(given: dict) -> tuple:
    """The model's ``TinyConfig`` and the run's ``TrainConfig`` from the command's options (``given``: its
    arguments by name), each option checked by the dataclass whose default it is; an error names the option."""
    from ropekit._validate import parse_number
    from ropekit.cli.params import parse_params
    from ropekit.model.tiny import TinyConfig
    from ropekit.model.train import TrainConfig

    length = parse_length(given["train_length"], "--train-length")
    task_weights = given["task_weights"]
    weights = None if task_weights is None else parse_params(task_weights, parse_number, "--task-weights")
    names = {name: "--" + name.replace("_", "-") for name in (*_TINY_FIELDS, *_TRAIN_FIELDS)}
    names |= {"rope_base": "--base", "train_length": "--train-length"}
    scaling = (given[key] for key in ("scaling", "factor", "factors", "param", "original_length", "init"))
    with option_errors(**names):
        config = TinyConfig(
            **{name: given[name] for name in _TINY_FIELDS},
            train_length=length,
            rope_base=given["base"],
            scaling=_scaling(*scaling, length),
        )
        settings = TrainConfig(
            **{name: given[name] for name in _TRAIN_FIELDS if name != "task_weights"}, task_weights=weights
        )
        if given["mixed_window"]:  # refused here, before any work, as train() would refuse it
            from ropekit.mixed_window import mixed_window_scaling

            mixed_window_scaling(config.scaling)
    return config, settings


def _scaling(name, factor, factors, params, original_length, init, length):
    """The ``--scaling`` config (``None`` without it), its L0 from ``--original-length`` or ``--init``'s length."""
    if name is None:
        for given, option in ((factor, "--factor"), (factors, "--factors"), (params, "--param")):
            if given:
                raise fail(f"{option} needs --scaling (e.g. --scaling longrope)")
        return None
    from ropekit.cli.params import build_scaling
    from ropekit.cli.scaling_options import _read_factors

    if original_length:
        original = parse_length(original_length, "--original-length")
    elif init is not None:
        from ropekit.errors import InvalidArgument
        from ropekit.model.checkpoint import load

        with option_errors(init="--init"):
            try:
                original = load(init).config.train_length
            except (OSError, ValueError) as error:
                reason = str(error)
                raise InvalidArgument("init", init, message=lambda n: f"{n('init', init)}: {reason}") from None
    else:
        original = 256
    typed = {}
    if factors is not None:
        values = _read_factors(factors)
        typed = {"short_factor": values, "long_factor": values}
    factor = length / original if factor is None else factor
    return build_scaling(name, factor, original, params=params, options=("short_factor", "long_factor"), **typed)


def _print_done(summary: dict, out: Path) -> None:
    """One line: steps, tokens, time, parameters and held-out bits per byte of the finished run."""
    from rich.console import Console

    Console().print(
        f"[bold]done[/]: {summary['steps']} steps, {summary['tokens']:,} tokens, {summary['wall_time_s']:.0f} s, "
        f"{summary['parameters']:,} parameters, held-out {summary['heldout_bpb']:.3f} bits/byte → {out}"
    )
