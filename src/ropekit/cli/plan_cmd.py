"""``ropekit plan``: extend a model from its training length to a target length — the bound, a safe base, methods."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit._costs import MAX_CONTEXT, ROBUST_DEFAULT
from ropekit.cli.common import (
    MAX_HEAD_DIM,
    check_bound_work,
    check_range,
    json_option,
    option_errors,
    parse_length,
    print_json,
)
from ropekit.cli.model_option import MODEL, model_defaults, read_model


def plan_command(
    head_dim: int | None = typer.Option(None, help="Attention head size (default: --model's, else 128)."),
    base: float | None = typer.Option(None, help="The model's RoPE base b (default: --model's, else 10000)."),
    original_length: str | None = typer.Option(
        None, help="Original length L0: the length the model was trained at, e.g. 4k (default: --model's)."
    ),
    target_length: str = typer.Option(..., help="Length wanted, e.g. 32k."),
    rotary_dim: int | None = typer.Option(None, help="Rotating dims (default: --model's, else head_dim)."),
    robust: bool | None = typer.Option(
        None,
        "--robust/--no-robust",
        metavar="",
        help=f"Compute the robust bound (default: only when {ROBUST_DEFAULT}, where L is the target).",
    ),
    model: Path | None = MODEL,
    json_output: bool = json_option("Print JSON instead of text and a table."),
) -> None:
    """Whether the base clears the bound at the target, the smallest safe base, and training-free methods (why);
    with --model, its RoPE and training length, and which of its layers take no RoPE (NoPE)."""
    from ropekit.cli.search_view import print_searched, searched_only
    from ropekit.theory import plan

    searched = searched_only(model, json_output)
    given = read_model(model)
    head_dim, base, rotary_dim, length = model_defaults(
        given, head_dim, base, rotary_dim, original_length, "--original-length"
    )
    check_range("--head-dim", head_dim, minimum=2, maximum=MAX_HEAD_DIM)
    check_range("--rotary-dim", rotary_dim, minimum=2, maximum=MAX_HEAD_DIM)
    train = parse_length(length, "--original-length", maximum=MAX_CONTEXT)
    # below 3 tokens every base > 1 is feasible: there is no bound to plan against
    target = parse_length(target_length, "--target-length", minimum=3, maximum=MAX_CONTEXT)
    check_bound_work(target, rotary_dim or head_dim, "--target-length", "--rotary-dim" if rotary_dim else "--head-dim")
    options = {
        "head_dim": "--head-dim",
        "rotary_dim": "--rotary-dim" if rotary_dim is not None else "--head-dim",
        "base": "--base",
    }
    options |= {"train_length": "--original-length", "target_length": "--target-length"}
    with option_errors(**options):
        result = plan(head_dim, base, train, target, rotary_dim=rotary_dim, robust=robust)
    from ropekit.attention.plan import attention_plan
    from ropekit.cli.extend_gguf import plan_flags
    from ropekit.cli.launch_view import plan_launch
    from ropekit.integrations.resolve import training_free_choice

    names = [method.name for method in result.methods]
    shape = {"head_dim": head_dim, "base": base, "rotary_dim": rotary_dim, "factor": result.factor}
    flags = plan_flags(names, **shape, train_length=train)
    model_path = given.path if given else None
    launch = plan_launch(names, **shape, train_length=train, target_length=target, model=model_path)
    attention = attention_plan(train, target)
    chosen = training_free_choice(result)
    if json_output:
        _print_json(result, given, flags, attention, launch, chosen[0], train, target, searched)
        return
    _print_text(result, given, flags, attention, launch, chosen, train, target)
    if searched is not None:
        print_searched(*searched)


def _print_json(result, given, flags, attention, launch, chosen: str, train: int, target: int, searched) -> None:
    from ropekit.cli.launch_view import launch_json

    llamacpp = {name: value[0] for name, value in flags.items()}
    described = {"model": given.to_dict()} if given else {}
    if given is not None and given.llama4 is not None:
        described["llama4_long_context"] = given.llama4.to_dict(train, target)
    described["launch"] = {name: launch_json(lines) for name, lines in launch.items()}
    described["launch_method"] = chosen
    if searched is not None:
        described["searched"] = searched[1]
    print_json({**result.to_dict(), "llamacpp_flags": llamacpp, "attention_methods": attention, **described})


def _print_text(result, given, flags, attention, launch, chosen: tuple[str, str], train: int, target: int) -> None:
    from rich.console import Console

    from ropekit.cli.launch_view import print_launch

    console = Console()
    _print_model(console, given, train, target)
    for line in result.lines():
        console.print(line, highlight=False)
    print_methods(console, result)
    console.print("llama.cpp flags for these methods (on a GGUF file without RoPE scaling):", highlight=False)
    for name, (_, text) in flags.items():
        console.print(f"  {name}: {text}", highlight=False)
    echo = lambda text: console.print(text, highlight=False, soft_wrap=True)  # noqa: E731
    method, why = chosen
    echo(f"Launch lines for {method} at {target:,} tokens ({why.removeprefix('plan: ')}; --json: every method):")
    print_launch(launch[method], echo)
    print_attention_plan(console, attention, target)


def print_methods(console, result) -> None:
    """The training-free scaling methods at the plan's factor: pairs per group, attention factor, first B_m < 0."""
    from rich.table import Table

    table = Table(title=f"training-free methods at s = {result.factor:g} (pairs per group)")
    for column in ("method", "kept", "blended", "interpolated", "attention factor", "first m with B_m < 0"):
        table.add_column(column, justify="right")
    for method in result.methods:
        table.add_row(
            method.name,
            str(len(method.kept)),
            str(len(method.blended)),
            str(len(method.interpolated)),
            f"{method.attention_factor:.4g}",
            f"none below {result.target_length:,}" if method.first_negative is None else f"{method.first_negative:,}",
        )
    console.print(table)


def print_attention_plan(console, rows: list[dict], target: int) -> None:
    """The training-free attention methods at the target: parameters, largest relative position, how to evaluate."""
    from rich.table import Table

    table = Table(title=f"training-free attention methods at {target:,} tokens (frequencies unchanged)")
    for column in ("method", "parameters", "largest relative position"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}={v:g}" for k, v in row["params"].items())
        table.add_row(row["method"], params, f"{row['max_relative_position']:,.0f}")
    console.print(table)
    for row in rows:
        if "rule" in row:
            console.print(f"{row['method']} rule of thumb: {row['rule']}", highlight=False)
            console.print(f"evaluate it: ropekit eval passkey {row['eval']}", highlight=False)


def _print_model(console, given, train: int, target: int) -> None:
    """The ``--model`` line: its layout and, with NoPE layers, what they mean for this plan (docs/theory.md); on
    Llama 4, what its temperature and chunked attention do at ``train`` and ``target`` tokens."""
    if given is None:
        return
    note = ""
    if given.layout is not None and given.layout.nope_layers:
        note = (
            ". The bound, the decay and every method below concern the RoPE layers only; the NoPE layers see no "
            "position, so no base or scaling changes them (docs/theory.md)"
        )
    console.print(f"--model: {given.layout_line()}{note}", highlight=False, soft_wrap=True)
    for line in given.llama4.lines(train, target) if given.llama4 is not None else []:
        console.print(line, highlight=False, soft_wrap=True)
