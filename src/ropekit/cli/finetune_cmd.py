"""``ropekit finetune``: continued training at a longer context on accelerate, exported as ``extend`` does.

Runs unchanged under ``accelerate launch -m ropekit.cli finetune ...`` (DDP, or FSDP with configs/fsdp.yaml).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import typer

from ropekit.cli.common import error_message, fail, json_option, option_errors, parse_length, print_json
from ropekit.cli.scaling_options import ScalingOptions, scaling_options

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
    "mixed_window": "--mixed-window",
    "sequence_parallel": "--sequence-parallel",
    "context_parallel": "--context-parallel",
    "fixed_seq_len": "--fixed-seq-len",
    "original_length": "--original-length",
    "model": "--model",
    "text": "--text",
    "out": "--out",
    "force": "--force",
    "resume": "--resume",
    "eval_tokens": "--eval-tokens",
    "passkey_trials": "--passkey-trials",
}


@scaling_options(target_length=typer.Option(..., "--target-length", help="Training window = new context, e.g. 32k."))
def finetune_command(
    method: ScalingOptions,
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
    chunks: int | None = typer.Option(
        None, "--chunks", help="PoSE: chunks per --window (default 2, the paper's); needs --window."
    ),
    mixed_window: bool = typer.Option(
        False,
        "--mixed-window",
        help="LongRoPE2: rows packed from documents ≤ L0 (positions reset, short list; equal lists: the original "
        "RoPE) or longer ones (long list); needs --scaling longrope.",
    ),
    sequence_parallel: int | None = typer.Option(
        None,
        "--sequence-parallel",
        help="Shard each sequence over N processes with DeepSpeed Ulysses (accelerate launch --config_file "
        "configs/sequence_parallel.yaml); 1: the same engine, unsharded.",
    ),
    context_parallel: int | None = typer.Option(
        None,
        "--context-parallel",
        help="Shard each sequence over N GPUs with torch's ring attention: the plan (--dry-run) only; the run is "
        "refused.",
    ),
    evaluate: bool = typer.Option(True, help="Before/after table (perplexity, passkey) at the end."),
    eval_tokens: str = typer.Option("16k", help="Tokens scored per perplexity length in the table."),
    passkey_trials: int = typer.Option(5, help="Passkey trials at the target length in the table."),
    out: Path = typer.Option(..., "--out", "-o", help="The new model folder (plus finetune/ with logs)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the interrupted run in --out."),
    force: bool = typer.Option(
        False, "--force", help="Start over, replacing the files in --out that it writes (others stay as they are)."
    ),
    json_output: bool = json_option("Print the report as JSON."),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Check everything the run checks, print the plan (peak memory, time per step) and exit.",
    ),
) -> None:
    """Fine-tune a model at a longer context with a RoPE method, then write it as `ropekit extend` does.

    Ctrl-C stops after the current step with a resumable checkpoint (--resume continues the same loss curve).
    OUT is built beside itself and its files renamed in when the model is written (those already there only with
    --force); an OUT that is, holds or lies inside the model or the text is refused. --factor is relative to the
    original (pre-training) length.
    """
    _run(SimpleNamespace(**locals(), **vars(method)))


def _run(options: SimpleNamespace) -> None:
    """The command: the request, every check (:func:`ropekit.finetune.request.prepare`), the plan, the run."""
    from rich.console import Console

    from ropekit.finetune.request import check_run_out, prepare
    from ropekit.finetune.run import run_prepared

    console = Console(stderr=True)
    o = options
    target = parse_length(o.target_length, "--target-length", minimum=2)
    try:  # before the method is resolved from the model: an --out over the model is refused first
        check_run_out(o.out, o.model, o.text, resume=o.resume, force=o.force)
    except (OSError, ValueError) as error:
        raise fail(error_message(error, _NAMES)) from None
    request = _request(o, target, console)
    if request.settings.sharding is not None:
        _sharded_plan(request, console, o.dry_run, o.json_output)
    with option_errors(**_NAMES):  # every other check the run makes before training, --dry-run included
        prepared = prepare(request, log=lambda message: console.print(message, highlight=False), out_checked=True)
    if request.settings.sharding is None:  # a sharded run's plan was made above
        _plan(request, console, options.dry_run)
    with option_errors(**_NAMES):
        report = run_prepared(prepared)
    if not prepared.accelerator.is_main_process:
        return
    if report.train.interrupted:
        console.print(
            f"stopped after step {report.train.steps_done}; checkpoint in {report.checkpoint} "
            "(run the same command with --resume to continue)",
            highlight=False,
        )
        raise typer.Exit(code=130)
    if options.json_output:
        print_json(report.to_dict())
        return
    _print_table(report)


def _request(o: SimpleNamespace, target: int, console):
    """The :class:`ropekit.finetune.request.FinetuneRequest` the options ask for (the method resolved, the settings
    and the request's own values validated; each error names its option)."""
    from ropekit.finetune.request import FinetuneRequest
    from ropekit.finetune.settings import FinetuneSettings

    eval_tokens = parse_length(o.eval_tokens, "--eval-tokens")
    spec, original, _, types, note = o.method.resolve(training=True)
    if note:
        console.print(note, highlight=False)
    fields = ("steps", "lr", "warmup_steps", "batch_size", "grad_accum", "weight_decay", "max_grad_norm", "seed")
    fields += ("lora_rank", "lora_alpha", "gradient_checkpointing", "mixed_precision", "checkpoint_every", "eval_every")
    with option_errors(**_NAMES):
        settings = FinetuneSettings(
            target_length=target,
            window=parse_length(o.window, "--window", minimum=2) if o.window else None,
            chunks=o.chunks,
            mixed_window=o.mixed_window,
            sequence_parallel=o.sequence_parallel,
            context_parallel=o.context_parallel,
            **{name: getattr(o, name) for name in fields},
        )
        return FinetuneRequest(
            o.model,
            spec,
            o.text,
            o.out,
            settings,
            layer_types=types,
            original_length=original,
            resume=o.resume,
            force=o.force,
            evaluate=o.evaluate,
            eval_tokens=eval_tokens,
            passkey_trials=o.passkey_trials,
        )


def _sharded_plan(request, console, dry_run: bool, json_output: bool) -> None:
    """The plan of a sharded run (:func:`ropekit.finetune.fit_parallel.plan_sharded_run`), from the config alone: a
    dry run needs only the model's ``config.json`` (no weights, no tokenizer) and stops here; a run that does not fit
    is refused, naming the longest sequence that does."""
    from ropekit.finetune.fit_parallel import plan_sharded_run
    from ropekit.integrations.hf.load import transformers_config

    with option_errors(**_NAMES):
        plan = plan_sharded_run(transformers_config(request.model), request.settings)
    if dry_run and json_output:
        print_json(plan.to_dict())
    else:
        console.print(plan.summary(), highlight=False)
    if not plan.fits:
        option = "--window" if request.settings.window else "--target-length"
        longest = (
            "no sequence fits"
            if plan.largest_sequence is None
            else f"the longest that fits is {plan.largest_sequence:,}"
        )
        raise fail(
            f"{option} {plan.sequence:,}: one device needs about {plan.per_device_bytes / 2**30:.2f} GiB, more "
            f"than 90% of the {(plan.available or 0) / 2**30:.2f} GiB free; {longest} (or shard over more devices)"
        )
    if dry_run:
        raise typer.Exit(code=0)


class _HeadRefused(Exception):
    """The dry run's measured step loaded a model whose loss training refuses (its one argument: training's error)."""


def _plan(request, console, dry_run: bool) -> None:
    """Print the plan of what fits (:mod:`ropekit.finetune.fit`); refuse a run that does not fit; stop on --dry-run.

    The plan reads the shapes only (no weights load before the input checks); --dry-run also times two short steps,
    on the model loaded and checked as training loads it.
    """
    from ropekit.finetune.fit import plan_finetune, refusal
    from ropekit.finetune.run import load_for_training
    from ropekit.finetune.train import checked_model
    from ropekit.integrations.hf.load import transformers_config

    def build():
        try:
            mixed = request.settings.mixed_window
            return checked_model(
                lambda: load_for_training(request.model, request.scaling, request.layer_types, mixed_window=mixed)
            )
        except ValueError as error:
            raise _HeadRefused(error) from None

    model, settings = request.model, request.settings
    try:
        fit_plan, largest = plan_finetune(transformers_config(model), settings, build_model=build if dry_run else None)
    except _HeadRefused as refused:
        raise fail(error_message(refused.args[0], _NAMES)) from None
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OSError) as error:
        if dry_run:
            raise fail(f"--dry-run: no plan for --model {str(model)!r} ({type(error).__name__}: {error})") from None
        console.print(f"plan: not available for this model ({type(error).__name__}: {error})", highlight=False)
        return
    console.print(fit_plan.summary(), highlight=False)
    if refused := refusal(fit_plan, largest):
        raise fail(error_message(refused, _NAMES))
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
