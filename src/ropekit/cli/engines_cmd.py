"""``ropekit engines``: the same RoPE in every engine, compared with transformers (``ropekit.engines``)."""

from __future__ import annotations

from pathlib import Path

import typer

from ropekit._costs import MAX_LOGITS
from ropekit.cli.common import error_message, fail, json_option, option_errors, parse_length, print_json
from ropekit.cli.scaling_options import ScalingOptions, scaling_options

GGUF = typer.Option(None, "--gguf", help="The GGUF file llama.cpp runs (default: written from a .gguf --model).")
LOGITS = typer.Option(
    256, "--logits", help=f"Random token ids whose logits are compared (0: none; at most {MAX_LOGITS})."
)
ENGINES = typer.Option(None, "--engines", help="Comma-separated engines (default: all).")


@scaling_options()
def engines_command(
    method: ScalingOptions,
    gguf: Path | None = GGUF,
    logits: int = LOGITS,
    engines: str | None = ENGINES,
    json_output: bool = json_option("Print the rows as JSON."),
) -> None:
    """Compare each engine (MLX-LM, llama.cpp, vLLM, SGLang, Ollama) with transformers on one RoPE.

    With method flags (those of `extend`) the model is first extended into a temporary folder; without them MODEL
    is compared as it is (an already-extended output). Each row: the engine and its version, its verdict (same,
    differs: how much, from which position and why, cannot express, cannot run here) and the line that launches it.
    """
    from ropekit.engines.compare import COMPARED_ENGINES, Extension, compare, engine_names

    model = method.model
    chosen = engine_names(engines.split(",")) if engines else COMPARED_ENGINES
    _check(model, chosen, logits, engines)
    extension, original = None, None
    if method.given:
        spec, original, target, types, _ = method.resolve(training=False)
        extension = Extension(spec, target_length=target, layer_types=types, flags=method.flags())
    elif model.suffix == ".gguf":
        raise fail("--model: a .gguf file needs method flags (--scaling, --base or --plan)")
    elif method.original_length:
        original = parse_length(method.original_length, "--original-length")
    report = (lambda message: None) if json_output else (lambda message: typer.echo(f"running {message} ...", err=True))
    with option_errors(model="--model"):
        result = compare(
            model, extension, original_length=original, engines=chosen, gguf=gguf, logits=logits, progress=report
        )
    if json_output:
        print_json(result.as_dict())
        return
    _print((result.reference, result.rows))
    if result.unchecked_versions:
        note = result.unchecked_versions
        typer.echo(f"\nnote: ropekit's engine checks were made against other versions than these: {note}")


def _check(model: Path, chosen: tuple[str, ...], logits: int, engines: str | None) -> None:
    """:func:`ropekit.engines.compare.check_compare`'s refusal, naming the option, before anything loads."""
    from ropekit.engines.compare import COMPARED_ENGINES, check_compare
    from ropekit.errors import InvalidArgument

    try:
        check_compare(model, engines=chosen, logits=logits)
    except InvalidArgument as error:
        if error.argument == "logits":
            raise fail(
                f"--logits must be between 0 and {MAX_LOGITS} (random token ids whose logits are compared), got "
                f"{logits}"
            ) from None
        if error.argument == "engines":
            raise fail(
                f"--engines {engines!r}: unknown {error.value}; available: {', '.join(COMPARED_ENGINES)}"
            ) from None
        raise fail(error_message(error, {error.argument: "--model"})) from None


def _print(rows) -> None:
    reference, engines = rows
    typer.echo(f"{reference.engine} {reference.version} (reference): {reference.detail}")
    for row in engines:
        typer.echo(f"\n{row.engine} {row.version or '(not installed)'}: {row.verdict}")
        typer.echo(f"  {row.detail}")
        typer.echo(f"  launch: {row.launch}")
        if row.interpreter:
            typer.echo(f"  ran in: {row.interpreter}")
