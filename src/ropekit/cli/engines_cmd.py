"""``ropekit engines``: the same RoPE in every engine, compared with transformers (``ropekit.engines``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from ropekit.cli.common import fail, json_option, parse_length, print_json
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
    TARGET,
    alias_texts,
    method_flags,
    resolve_scaling,
)

GGUF = typer.Option(None, "--gguf", help="The GGUF file llama.cpp runs (default: written from a .gguf --model).")
LOGITS = typer.Option(256, "--logits", help="Random token ids whose logits are compared (0: none).")
ENGINES = typer.Option(None, "--engines", help="Comma-separated engines (default: all).")


def engines_command(
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
    from ropekit.engines.compare import ENGINES as ALL

    chosen = tuple(e.strip() for e in engines.split(",")) if engines else ALL
    if not (model.is_file() and model.suffix == ".gguf") and not (model / "config.json").is_file():
        raise fail(f"--model {str(model)!r}: give a transformers model folder (with config.json) or a .gguf file")
    unknown = sorted(set(chosen) - set(ALL))
    if unknown:
        raise fail(f"--engines {engines!r}: unknown {unknown}; available: {', '.join(ALL)}")
    if logits < 0:
        raise fail(f"--logits must be >= 0, got {logits}")
    given = bool(scaling) or base is not None or plan
    launch = None
    with tempfile.TemporaryDirectory(prefix="ropekit-engines-") as scratch:
        if given:
            spec, original, target, types, _ = resolve_scaling(
                model=model, scaling=scaling, factor=factor, original_length=original_length, base=base, plan=plan,
                target_length=target_length, training=False, layer_types=layer_types,
                aliases=alias_texts(ramp, beta_fast, beta_slow, fixed_seq_len), factors=factors, params=param,
            )  # fmt: skip
            folder, gguf = _extended(model, spec, Path(scratch), target, original, types, gguf)
            source = _source(model, Path(scratch), original, types) if logits and model.suffix == ".gguf" else None
            flags = method_flags(
                scaling=scaling, factor=factor, original_length=original_length, base=base, plan=plan,
                target_length=target_length, ramp=ramp, beta_fast=beta_fast, beta_slow=beta_slow,
                fixed_seq_len=fixed_seq_len, factors=factors, param=param, layer_types=layer_types,
            )  # fmt: skip
            launch = _launch_lines(folder, original, model=model, flags=flags)
        else:
            source = None
            if model.suffix == ".gguf":
                raise fail("--model: a .gguf file needs method flags (--scaling, --base or --plan)")
            folder, original = model, parse_length(original_length, "--original-length") if original_length else None
            launch = _launch_lines(folder, original, gguf=gguf, written=True)
        rows = _compare(folder, original, logits, chosen, gguf, source, launch, quiet=json_output)
    if json_output:
        summary = {"reference": rows[0].as_dict(), "engines": [row.as_dict() for row in rows[1]]}
        summary["launch"] = {name: line.as_dict() for name, line in launch.items()}
        print_json(summary)
        return
    _print(rows)


def _extended(model, spec, scratch: Path, target, original, types, gguf):
    """``(folder, gguf)``: ``model`` extended with ``spec`` into ``scratch`` (and a GGUF beside it when the model
    is one)."""
    from ropekit.finetune.export import extend

    result = extend(model, spec, scratch / "model", target_length=target, original_length=original, layer_types=types)
    if model.suffix == ".gguf" and gguf is None:
        from ropekit.integrations.gguf_write import extend_gguf

        try:
            gguf = extend_gguf(model, spec, scratch / "model.gguf", target_length=target, layer_types=types).out
        except ValueError:
            gguf = None  # the llama.cpp row says why
    return result.out, gguf


def _source(model: Path, scratch: Path, original, types) -> tuple[Path, Path]:
    """``(unextended folder, source GGUF)``: the GGUF model's own weights with its own RoPE, on which the llama.cpp
    row measures the quantisation floor."""
    from ropekit.finetune.export import extend

    plain = extend(model, None, scratch / "source", original_length=original, layer_types=types)
    return plain.out, model


def _launch_lines(folder: Path, original: int | None, *, model=None, flags: str = "...", gguf=None, written=False):
    """The launch lines: for ``folder`` (and ``--gguf``) itself when ``written`` (an output ``extend`` wrote), else
    for the files the user writes (``extend --model MODEL FLAGS``), not the temporary ones the comparison ran on."""
    import json

    from ropekit.engines.compare import probe_for
    from ropekit.engines.launch import launch_lines

    config = json.loads((folder / "config.json").read_text())
    target = probe_for(folder, original_length=original).target_length
    if not written:
        return launch_lines(config, target, model=model, method=flags)
    return launch_lines(config, target, folder=folder, gguf=gguf)


def _compare(folder: Path, original, logits: int, chosen, gguf, source, launch, *, quiet: bool):
    from ropekit.engines.compare import compare_folder, probe_for

    probe = probe_for(folder, original_length=original, logit_tokens=logits)
    report = (lambda message: None) if quiet else (lambda message: typer.echo(f"running {message} ...", err=True))
    return compare_folder(folder, probe, engines=chosen, gguf=gguf, source=source, progress=report, launch=launch)


def _print(rows) -> None:
    reference, engines = rows
    typer.echo(f"{reference.engine} {reference.version} (reference): {reference.detail}")
    for row in engines:
        typer.echo(f"\n{row.engine} {row.version or '(not installed)'}: {row.verdict}")
        typer.echo(f"  {row.detail}")
        typer.echo(f"  launch: {row.launch}")
