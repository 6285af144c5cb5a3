"""``ropekit extend``: copy a model with a new RoPE in a config.json that transformers loads natively."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import error_message, fail, json_option, name_option, option_errors, parse_length, print_json
from ropekit.cli.extend_attention import ATTENTION, attention_entry

MODEL = typer.Option(..., "--model", help="A transformers model folder or a .gguf file.")
SCALING = typer.Option(None, "--scaling", help="Method: linear, ntk, dynamic, yarn, llama3, longrope, ... or none.")
FACTOR = typer.Option(
    None,
    "--factor",
    help="Scaling factor s >= 1 over the original length, also for an already-extended model "
    "(default: target length / original length).",
)
ORIGINAL = typer.Option(None, "--original-length", help="Pre-training length, e.g. 8k (default: from the config).")
BASE = typer.Option(None, "--base", help="Change the RoPE base to B (Men et al.'s recipe); instead of --scaling.")
PLAN = typer.Option(False, "--plan", help="Take the method from `ropekit plan` for --target-length (says which).")
TARGET = typer.Option(None, "--target-length", help="New context length, e.g. 32k (default: original × factor).")
RAMP = typer.Option(None, "--ramp", help="YaRN ramp: transformers (default) or paper (written as longrope).")
BETA_FAST = typer.Option(None, "--beta-fast", help="YaRN beta_fast (default 32).")
BETA_SLOW = typer.Option(None, "--beta-slow", help="YaRN beta_slow (default 1).")
FIXED = typer.Option(None, "--fixed-seq-len", help="Freeze dynamic NTK / LongRoPE at this length, e.g. 32k.")
FACTORS = typer.Option(None, "--factors", help="JSON file with per-pair factors (a list) for --scaling longrope.")
LAYER_TYPES = typer.Option(None, "--layer-types", help="Per-layer-type models: comma-separated types to scale.")
PARAM = typer.Option(None, "--param", help="Another field of the method, NAME=VALUE (repeatable), as `frequencies`.")
OUT = typer.Option(..., "--out", "-o", help="The new model folder.")
FORCE = typer.Option(False, "--force", help="Replace the files in --out that it writes (others stay as they are).")
FORMAT = typer.Option(None, "--format", help="Output: folder or gguf (default: gguf when --out ends in .gguf).")

_NAMES = {
    "target_length": "--target-length",
    "original_length": "--original-length",
    "factor": "--factor",
    "beta_fast": "--beta-fast",
    "beta_slow": "--beta-slow",
    "fixed_seq_len": "--fixed-seq-len",
    "layer_types": "--layer-types",
    "ramp": "--ramp",
    "base": "--base",
    "model": "--model",
    "out": "--out",
    "force": "--force",
}


def check_out(out: Path, inputs: list[tuple[str, Path | None]], *, force: bool, kind: str = "folder") -> None:
    """The one-line error for an ``--out`` that overlaps an input, holds what it would write without ``--force``
    or has no parent."""
    from ropekit._output import check_output
    from ropekit.finetune.export import written_names

    names = written_names(inputs[0][1]) if kind == "folder" else ()
    try:
        check_output(out, inputs, names=names, force=force, kind="file" if kind == "gguf" else "folder")
    except (OSError, ValueError) as error:
        raise fail(error_message(error, _NAMES)) from None


def alias_texts(
    ramp: str | None, beta_fast: float | None, beta_slow: float | None, fixed_seq_len: str | None
) -> dict[str, str | None]:
    """The texts of ``--ramp``, ``--beta-fast``, ``--beta-slow`` and ``--fixed-seq-len``: each stands for
    ``--param NAME=VALUE`` of the field of its name and is read the same way (errors name the option typed)."""
    length = parse_length(fixed_seq_len, "--fixed-seq-len") if fixed_seq_len else None
    texts = {"ramp": ramp, "beta_fast": beta_fast, "beta_slow": beta_slow, "fixed_seq_len": length}
    return {field: None if value is None else str(value) for field, value in texts.items()}


def method_flags(**options: Any) -> str:
    """``extend``'s method flags as given (option name → value; ``None``, ``False`` and ``[]``: not given), for
    the launch lines that write a file first."""
    words: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False or value == []:
            continue
        if value is True:
            words.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            text = f"{item:g}" if isinstance(item, float) else str(item)
            words += [flag, shlex.quote(text)]
    return " ".join(words)


def _read_factors(path: Path) -> tuple[float, ...]:
    """``--factors FILE``: a JSON list of per-pair factors (exits 2 naming the option otherwise)."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise fail(f"--factors {str(path)!r}: cannot read a JSON list ({error})") from None
    if not isinstance(values, list):
        raise fail(f"--factors {str(path)!r} must hold a JSON list of per-pair factors")
    return tuple(values)


def resolve_scaling(
    *,
    model: Path,
    scaling: str | None,
    factor: float | None,
    original_length: str | None,
    base: float | None,
    plan: bool,
    target_length: str | None,
    training: bool,
    layer_types: str | None = None,
    extra: dict[str, Any] | None = None,
    aliases: dict[str, str | None] | None = None,
    factors: Path | None = None,
    params: list[str] | None = None,
) -> tuple[Any, int, int | None, tuple[str, ...] | None, str | None]:
    """``(scaling, original length, target length or None, layer types, note)`` from the shared options.

    Exits with a one-line error for contradictory or missing options, before any weights load. ``--factor`` is
    relative to the original (pre-training) length, also for a model whose config already extends it. ``aliases``
    holds the texts of the options that stand for one ``--param`` field (:func:`alias_texts`); ``extra``, fields
    given as values.
    """
    from ropekit.integrations.hf_config import first_scaled_type, load_config, original_length_of, rope_of

    if scaling == "base" and base is not None:
        scaling = None  # `--scaling base --base B` is the base change `--base B` alone names
    chosen = sum(bool(x) for x in (scaling, base is not None, plan))
    if chosen != 1:
        raise fail("give exactly one of --scaling NAME, --base B or --plan (with --target-length)")
    types = tuple(t.strip() for t in layer_types.split(",") if t.strip()) if layer_types else None
    try:
        config = load_config(model)
        rope_of(config)  # refuses a model without RoPE
    except (FileNotFoundError, ValueError) as error:  # the model's own config is at fault, not an option
        message = name_option(str(error), {"model": "--model"})
        raise fail(message if message.startswith("--") else f"--model {str(model)!r}: {message}") from None
    with option_errors(**_NAMES):
        rope = rope_of(config, first_scaled_type(config, types))  # the layers the method goes to
        original = (
            parse_length(original_length, "--original-length") if original_length else original_length_of(config, rope)
        )
    target = parse_length(target_length, "--target-length") if target_length else None
    if target is not None and target <= original:
        raise fail(f"--target-length must be above the original length {original:,}, got {target:,}")
    if factor is not None and target is not None and math.floor(original * factor + 0.5) != target:
        raise fail(
            f"--factor {factor:g} and --target-length {target:,} disagree: --factor is relative to the original "
            f"length {original:,}, so it means {math.floor(original * factor + 0.5):,} tokens; give one of them"
        )
    if plan:
        if target is None:
            raise fail("--plan needs --target-length (the length to plan for)")
        from ropekit.finetune.choose import plan_scaling

        with option_errors(target_length="--target-length", train_length="--original-length"):
            spec, note = plan_scaling(rope, original, target, training=training)
        return spec, original, target, types, note
    if base is not None:
        from ropekit.scaling import BaseChange

        with option_errors(base="--base"):
            return BaseChange(base=base), original, target, types, None
    if scaling in ("none", "default"):
        return None, original, target, types, None
    from ropekit.cli.params import build_scaling

    typed = {k: v for k, v in (extra or {}).items() if v is not None}
    options = ("beta_fast", "beta_slow", "ramp", "fixed_seq_len", "short_factor", "long_factor")
    if factors is not None:
        values = _read_factors(factors)
        typed.update(short_factor=values, long_factor=values)
    if factor is None and target is not None:
        factor = target / original
    spec = build_scaling(scaling, factor, original, params=params, aliases=aliases, options=options, **typed)
    return spec, original, target, types, None


def extend_command(
    model: Path = MODEL,
    scaling: str | None = SCALING,
    factor: float | None = FACTOR,
    original_length: str | None = ORIGINAL,
    base: float | None = BASE,
    plan: bool = PLAN,
    target_length: str | None = TARGET,
    ramp: str | None = RAMP,
    beta_fast: float | None = BETA_FAST,
    beta_slow: float | None = BETA_SLOW,
    fixed_seq_len: str | None = FIXED,
    factors: Path | None = FACTORS,
    param: list[str] | None = PARAM,
    layer_types: str | None = LAYER_TYPES,
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
    from ropekit.cli.gguf_out import choose_format, extend_to_gguf

    kind = choose_format(out, model, output_format)
    check_out(out, [("model", model)], force=force, kind=kind)
    spec, original, target, types, note = resolve_scaling(
        model=model,
        scaling=scaling,
        factor=factor,
        original_length=original_length,
        base=base,
        plan=plan,
        target_length=target_length,
        training=False,
        layer_types=layer_types,
        aliases=alias_texts(ramp, beta_fast, beta_slow, fixed_seq_len),
        factors=factors,
        params=param,
    )
    extra_config = attention_entry(attention, original=original, target=target)
    if kind == "gguf" and extra_config:
        raise fail("--attention writes config.json for vLLM/SGLang; llama.cpp has no dual-chunk attention (GGUF --out)")
    common = {"target": target, "original": original, "layer_types": types, "force": force, "note": note}
    common["method"] = method_flags(
        scaling=scaling, factor=factor, original_length=original_length, base=base, plan=plan,
        target_length=target_length, ramp=ramp, beta_fast=beta_fast, beta_slow=beta_slow, fixed_seq_len=fixed_seq_len,
        factors=factors, param=param, layer_types=layer_types,
    )  # fmt: skip
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
    from ropekit.cli.gguf_out import flags_for, model_rope_of
    from ropekit.cli.launch_view import launch_json, print_launch
    from ropekit.engines.launch import launch_lines
    from ropekit.finetune.export import extend
    from ropekit.integrations.native import default_target

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
        raise fail(name_option(str(error), _NAMES)) from None
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
