"""``ropekit extend``: copy a model with a new RoPE in a config.json that transformers loads natively."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import error_message, fail, json_option, option_errors, print_json
from ropekit.cli.extend_attention import ATTENTION, attention_entry
from ropekit.cli.scaling_options import NAMES, ScalingOptions, scaling_options

OUT = typer.Option(..., "--out", "-o", help="The new model folder.")
FORCE = typer.Option(False, "--force", help="Replace the files in --out that it writes (others stay as they are).")
FORMAT = typer.Option(None, "--format", help="Output: folder or gguf (default: gguf when --out ends in .gguf).")

_NAMES = {**NAMES, "out": "--out", "force": "--force", "extra_config": "--attention"}


def check_out(out: Path, inputs: list[tuple[str, Path | None]], *, force: bool, kind: str = "folder") -> None:
    """The one-line error for an ``--out`` that overlaps an input, holds what it would write without ``--force``
    or has no parent."""
    from ropekit._output import check_output
    from ropekit.integrations.hf.extend import written_names

    names = written_names(inputs[0][1]) if kind == "folder" else ()
    try:
        check_output(out, inputs, names=names, force=force, kind="file" if kind == "gguf" else "folder")
    except (OSError, ValueError) as error:
        raise fail(error_message(error, _NAMES)) from None


@scaling_options()
def extend_command(
    method: ScalingOptions,
    attention: str | None = ATTENTION,
    out: Path = OUT,
    force: bool = FORCE,
    output_format: str | None = FORMAT,
    json_output: bool = json_option("Print what was written as JSON."),
) -> None:
    """Copy a model with a new RoPE (a method, a base change or the planner's choice) that loads natively.

    The new config.json makes transformers.AutoModelForCausalLM.from_pretrained(OUT) give, without ropekit, the
    logits of ropekit's patched model: methods transformers names are written as themselves, base changes as
    `default` with the new rope_theta, any other static per-pair scaling as `longrope` with explicit factors.
    --factor is relative to the original (pre-training) length. OUT is written beside itself and its files renamed
    in at the end (those already there only with --force); an OUT that is, holds or lies inside the model is refused. A .gguf OUT (or --format gguf) copies a GGUF
    model's tensors as they are and sets llama.cpp's RoPE metadata (docs/llamacpp.md); llama.cpp's load-time flags
    for the same RoPE are printed too.
    """
    from ropekit.cli.extend_gguf import choose_format, extend_to_gguf

    model = method.model
    kind = choose_format(out, model, output_format)
    check_out(out, [("model", model)], force=force, kind=kind)
    spec, original, target, types, note = method.resolve(training=False)
    extra_config = attention_entry(attention, original=original, target=target)
    if kind == "gguf" and extra_config:
        raise fail("--attention writes config.json for vLLM/SGLang; llama.cpp has no dual-chunk attention (GGUF --out)")
    common = {"target": target, "original": original, "layer_types": types, "force": force, "note": note}
    common["method"] = method.flags()
    if kind == "gguf":
        extend_to_gguf(model, spec, out, json_output=json_output, **common)
        return
    _extend_folder(model, spec, out, json_output=json_output, extra_config=extra_config, **common)


def _extend_folder(
    model: Path,
    spec: Any,
    out: Path,
    *,
    target: int | None,
    original: int,
    layer_types: tuple[str, ...] | None,
    force: bool,
    note: str | None,
    json_output: bool,
    extra_config: dict[str, Any],
    method: str,
) -> None:
    """Write the transformers folder ``out`` (config.json with the new RoPE, the weights as they are) and say what
    was written: JSON, or lines with the rope notes and the line that launches each engine with it."""
    from ropekit.cli.extend_gguf import flags_for, model_rope_of
    from ropekit.cli.launch_view import launch_json, print_launch
    from ropekit.engines.launch import launch_lines
    from ropekit.integrations.hf.extend import extend
    from ropekit.integrations.hf.native_rope import default_target

    try:
        with option_errors(**_NAMES):
            result = extend(
                model,
                spec,
                out,
                target_length=target,
                original_length=original,
                layer_types=layer_types,
                force=force,
                extra_config=extra_config,
            )
    except OSError as error:
        raise fail(error_message(error, _NAMES)) from None
    summary = {
        "out": str(result.out),
        "plan": note,
        "rope_parameters": result.config["rope_parameters"],
        "max_position_embeddings": result.config["max_position_embeddings"],
        "how": result.notes,
        **{key: result.config[key] for key in extra_config},
    }
    flags, _ = flags_for(model_rope_of(model, spec, layer_types))
    summary["llamacpp_flags"] = flags
    served = target or default_target(spec, original)
    lines = launch_lines(result.config, served, folder=result.out, model=model, method=method)
    summary["launch"] = launch_json(lines)
    if json_output:
        print_json(summary)
        return
    if note:
        typer.echo(note)
    typer.echo(f"wrote {result.out} (max_position_embeddings {result.config['max_position_embeddings']:,})")
    for line in result.notes:
        typer.echo(f"  rope: {line}")
    for key in extra_config:
        typer.echo(f"  {key}: {json.dumps(result.config[key])}")
    typer.echo(f"  launch it at {served:,} tokens:")
    print_launch(lines, typer.echo, indent="    ")
