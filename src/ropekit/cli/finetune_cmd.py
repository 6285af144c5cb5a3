"""``ropekit finetune``: continued training at a longer context on accelerate, exported as ``extend`` does.

Runs unchanged under ``accelerate launch -m ropekit.cli finetune ...`` (DDP, or FSDP with configs/fsdp.yaml).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit.cli.common import fail, json_option, name_option, option_errors, parse_length, print_json
from ropekit.cli.extend_cmd import (
    BASE,
    BETA_FAST,
    BETA_SLOW,
    FACTOR,
    FACTORS,
    FIXED,
    LAYER_TYPES,
    MODEL,
    ORIGINAL,
    PARAM,
    PLAN,
    RAMP,
    SCALING,
    resolve_scaling,
)

_NAMES = {
    "target_length": "--target-length",
    "steps": "--steps",
    "lr": "--lr",
    "warmup_steps": "--warmup-steps",
    "batch_size": "--batch-size",
    "grad_accum": "--grad-accum",
    "lora_rank": "--lora-rank",
    "lora_alpha": "--lora-alpha",
    "mixed_precision": "--mixed-precision",
    "checkpoint_every": "--checkpoint-every",
    "eval_every": "--eval-every",
    "seed": "--seed",
    "max_grad_norm": "--max-grad-norm",
    "weight_decay": "--weight-decay",
    "layer_types": "--layer-types",
    "window": "--window",
    "chunks": "--chunks",
    "original_length": "--original-length",
    "model": "--model",
    "text": "--text",
    "out": "--out",
    "force": "--force",
    "resume": "--resume",
}


def finetune_command(
    model: Path = MODEL,
    scaling: str | None = SCALING,
    factor: float | None = FACTOR,
    original_length: str | None = ORIGINAL,
    base: float | None = BASE,
    plan: bool = PLAN,
    target_length: str = typer.Option(..., "--target-length", help="Training window = new context, e.g. 32k."),
    text: Path = typer.Option(..., "--text", help="Training text: UTF-8 file, .jsonl with 'text', or a folder."),
    steps: int = typer.Option(400, help="Optimizer steps."),
    lr: float = typer.Option(2e-5, help="Peak learning rate (AdamW; warm-up then cosine to 10%)."),
    warmup_steps: int | None = typer.Option(None, help="Warm-up steps (default 5% of --steps)."),
    batch_size: int = typer.Option(1, help="Windows per process per micro-step."),
    grad_accum: int = typer.Option(1, help="Micro-steps per optimizer step."),
    weight_decay: float = typer.Option(0.0, help="AdamW weight decay."),
    max_grad_norm: float = typer.Option(1.0, help="Gradient clipping (0: off)."),
    lora_rank: int = typer.Option(0, help="LoRA rank (0: train all weights); norms and embeddings stay trainable."),
    lora_alpha: float | None = typer.Option(None, help="LoRA alpha (default 2 × rank)."),
    gradient_checkpointing: bool = typer.Option(True, help="Recompute decoder layers in the backward pass."),
    mixed_precision: str = typer.Option("auto", help="auto (bf16 where supported), bf16, fp16 or no."),
    checkpoint_every: int = typer.Option(100, help="Resumable checkpoint every N steps (0: only at the end)."),
    eval_every: int = typer.Option(0, help="Held-out loss every N steps (0: before and after only)."),
    seed: int = typer.Option(0, help="Data order and LoRA initialisation."),
    window: str | None = typer.Option(
        None, "--window", help="PoSE: train on windows of W tokens (e.g. 2k) whose positions skip across the target."
    ),
    chunks: int = typer.Option(2, "--chunks", help="PoSE: chunks per --window (the paper's 2)."),
    ramp: str | None = RAMP,
    beta_fast: float | None = BETA_FAST,
    beta_slow: float | None = BETA_SLOW,
    fixed_seq_len: str | None = FIXED,
    factors: Path | None = FACTORS,
    param: list[str] | None = PARAM,
    layer_types: str | None = LAYER_TYPES,
    evaluate: bool = typer.Option(True, help="Before/after table (perplexity, passkey) at the end."),
    eval_tokens: str = typer.Option("16k", help="Tokens scored per perplexity length in the table."),
    passkey_trials: int = typer.Option(5, help="Passkey trials at the target length in the table."),
    out: Path = typer.Option(..., "--out", "-o", help="The new model folder (plus finetune/ with logs)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the interrupted run in --out."),
    force: bool = typer.Option(
        False, "--force", help="Start over, replacing the files in --out that it writes (others stay as they are)."
    ),
    json_output: bool = json_option("Print the report as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (peak memory, time per step) and exit."),
) -> None:
    """Fine-tune a model at a longer context with a RoPE method, then write it as `ropekit extend` does.

    Ctrl-C stops after the current step with a resumable checkpoint (--resume continues the same loss curve).
    OUT is built beside itself and its files renamed in when the model is written (those already there only with
    --force); an OUT that is, holds or lies inside the model or the text is refused. --factor is relative to the
    original (pre-training) length.
    """
    from rich.console import Console

    from ropekit.finetune.run import check_run_inputs, check_run_out, finetune
    from ropekit.finetune.settings import FinetuneSettings

    console = Console(stderr=True)
    target = parse_length(target_length, "--target-length", minimum=2)
    try:
        check_run_out(out, model, text, resume=resume, force=force)  # before the plan's measured step
    except (OSError, ValueError) as error:
        raise fail(name_option(str(error), _NAMES)) from None
    spec, original, _, types, note = resolve_scaling(
        model=model,
        scaling=scaling,
        factor=factor,
        original_length=original_length,
        base=base,
        plan=plan,
        target_length=target_length,
        training=True,
        layer_types=layer_types,
        extra={
            "ramp": ramp,
            "beta_fast": beta_fast,
            "beta_slow": beta_slow,
            "fixed_seq_len": parse_length(fixed_seq_len, "--fixed-seq-len") if fixed_seq_len else None,
        },
        factors=factors,
        params=param,
    )
    if note:
        console.print(note, highlight=False)
    with option_errors(**_NAMES):
        settings = FinetuneSettings(
            target_length=target,
            steps=steps,
            lr=lr,
            warmup_steps=warmup_steps,
            batch_size=batch_size,
            grad_accum=grad_accum,
            weight_decay=weight_decay,
            max_grad_norm=max_grad_norm,
            seed=seed,
            lora_rank=lora_rank,
            lora_alpha=lora_alpha,
            gradient_checkpointing=gradient_checkpointing,
            mixed_precision=mixed_precision,
            checkpoint_every=checkpoint_every,
            eval_every=eval_every,
            window=parse_length(window, "--window", minimum=2) if window else None,
            chunks=chunks,
        )
    with option_errors(**_NAMES):  # the checks that need no weights, before the plan's measured step
        check_run_inputs(model, spec, text, target, layer_types=types, original_length=original)
    _plan(model, spec, types, settings, console, dry_run)
    with option_errors(**_NAMES):
        report = finetune(
            model,
            spec,
            text,
            out,
            settings,
            layer_types=types,
            original_length=original,
            resume=resume,
            force=force,
            evaluate=evaluate,
            eval_tokens=parse_length(eval_tokens, "--eval-tokens"),
            passkey_trials=passkey_trials,
            log=lambda message: console.print(message, highlight=False),
        )
    from accelerate import PartialState

    if not PartialState().is_main_process:  # the state finetune() made
        return
    if report.train.interrupted:
        console.print(
            f"stopped after step {report.train.steps_done}; checkpoint in {report.checkpoint} "
            "(run the same command with --resume to continue)",
            highlight=False,
        )
        raise typer.Exit(code=130)
    if json_output:
        print_json(report.to_dict())
        return
    _print_table(report)


def _plan(model: Path, spec, types, settings, console, dry_run: bool) -> None:
    """Print the plan of what fits (:mod:`ropekit.finetune.fit`); refuse a run that does not fit; stop on --dry-run.

    The plan reads the shapes only (no weights load before the input checks); --dry-run also times two short steps.
    """
    from ropekit.finetune.fit import plan_finetune, refusal
    from ropekit.finetune.run import _load_for_training
    from ropekit.integrations.hf_config import load_config

    build = lambda: _load_for_training(model, spec, types)  # noqa: E731
    try:
        fit_plan, largest = plan_finetune(load_config(model), settings, build_model=build if dry_run else None)
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OSError) as error:
        if dry_run:
            raise fail(f"--dry-run: no plan for --model {str(model)!r} ({type(error).__name__}: {error})") from None
        console.print(f"plan: not available for this model ({type(error).__name__}: {error})", highlight=False)
        return
    console.print(fit_plan.summary(), highlight=False)
    if message := refusal(fit_plan, largest):
        raise fail(name_option(message, _NAMES))
    if dry_run:
        raise typer.Exit(code=0)


def _print_table(report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"wrote {report.out}; held-out loss {report.train.heldout_before:.4f} → {report.train.heldout_after:.4f}; "
        f"{report.train.tokens_per_second:,.0f} training tokens/s",
        highlight=False,
    )
    if not report.rows:
        return
    table = Table(title=f"before / after fine-tuning ({report.original_length:,} → {report.target_length:,})")
    for column in ("model", f"ppl @ {report.original_length:,}", f"ppl @ {report.target_length:,}", "passkey"):
        table.add_column(column, justify="right")
    for row in report.rows:
        table.add_row(
            row["model"],
            f"{row['ppl_original']:.3f}",
            f"{row['ppl_target']:.3f}",
            f"{row['passkey_correct']}/{row['passkey_trials']}",
        )
    console.print(table)
