"""``ropekit engines``: the same RoPE in every engine, compared with transformers (``ropekit.engines``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from ropekit.cli.common import fail, json_option, option_errors, parse_length, print_json
from ropekit.cli.scaling_options import ScalingOptions, scaling_options

GGUF = typer.Option(None, "--gguf", help="The GGUF file llama.cpp runs (default: written from a .gguf --model).")
#: the most ids ``--logits`` may ask for: each engine's logits are a float64 (ids, vocab) table held beside the
#: reference's, 1.2 GB each at 1,024 ids and a 152k vocabulary
MAX_LOGITS = 1024
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
    from ropekit.engines.compare import COMPARED_ENGINES as ALL

    if not 0 <= logits <= MAX_LOGITS:
        raise fail(
            f"--logits must be between 0 and {MAX_LOGITS} (random token ids whose logits are compared), got {logits}"
        )
    model, original_length = method.model, method.original_length
    chosen = tuple(e.strip() for e in engines.split(",")) if engines else ALL
    if not (model.is_file() and model.suffix == ".gguf") and not (model / "config.json").is_file():
        raise fail(f"--model {str(model)!r}: give a transformers model folder (with config.json) or a .gguf file")
    unknown = sorted(set(chosen) - set(ALL))
    if unknown:
        raise fail(f"--engines {engines!r}: unknown {unknown}; available: {', '.join(ALL)}")
    with tempfile.TemporaryDirectory(prefix="ropekit-engines-") as scratch:
        if method.given:
            spec, original, target, types, _ = method.resolve(training=False)
            folder, gguf, source = _extended(model, spec, Path(scratch), target, original, types, gguf)
            source = source if logits else None
            where = {"model": model, "flags": method.flags()}
        else:
            source = None
            if model.suffix == ".gguf":
                raise fail("--model: a .gguf file needs method flags (--scaling, --base or --plan)")
            folder, original = model, parse_length(original_length, "--original-length") if original_length else None
            where = {"gguf": gguf, "written": True}
        probe = _probe(folder, original, logits)
        launch = _launch_lines(folder, probe.target_length, **where)
        rows = _compare(folder, probe, chosen, gguf, source, launch, quiet=json_output)
    note = _version_note(rows)
    if json_output:
        summary = {"reference": rows[0].as_dict(), "engines": [row.as_dict() for row in rows[1]]}
        summary["launch"] = {name: line.as_dict() for name, line in launch.items()}
        summary["unchecked_versions"] = note
        print_json(summary)
        return
    _print(rows)
    if note:
        typer.echo(f"\nnote: ropekit's engine checks were made against other versions than these: {note}")


def _version_note(rows) -> str | None:
    """The engines run here whose version is not the one ropekit is checked against (``ropekit._versions``)."""
    from ropekit._versions import unchecked

    reference, engines = rows
    return unchecked({row.engine: row.version for row in (reference, *engines)})


def _extended(model, spec, scratch: Path, target, original, types, gguf):
    """``(folder, gguf, source)``: ``model`` extended with ``spec`` into ``scratch``. A GGUF model is dequantised
    once, into the unextended folder (``source`` = that folder and the GGUF file, on which the llama.cpp row
    measures the quantisation floor), which is then extended (its weights copied as they are), and the extended
    GGUF is written beside it unless ``gguf`` is given; a folder model has no ``source``."""
    from ropekit.integrations.hf.extend import extend

    options = {"original_length": original, "layer_types": types}
    if model.suffix != ".gguf":
        return extend(model, spec, scratch / "model", target_length=target, **options).out, gguf, None
    plain = extend(model, None, scratch / "source", **options).out
    folder = extend(plain, spec, scratch / "model", target_length=target, **options).out
    if gguf is None:
        from ropekit.integrations.gguf.write_rope import extend_gguf

        try:
            gguf = extend_gguf(model, spec, scratch / "model.gguf", target_length=target, layer_types=types).out
        except ValueError:
            gguf = None  # the llama.cpp row says why
    return folder, gguf, (plain, model)


def _probe(folder: Path, original: int | None, logits: int):
    from ropekit.engines.compare import probe_for

    return probe_for(folder, original_length=original, logit_tokens=logits)


def _launch_lines(folder: Path, target: int, *, model=None, flags: str = "...", gguf=None, written=False):
    """The launch lines at ``target`` tokens: for ``folder`` (and ``--gguf``) itself when ``written`` (an output
    ``extend`` wrote), else for the files the user writes (``extend --model MODEL FLAGS``), not the temporary ones
    the comparison ran on."""
    import json

    from ropekit.engines.launch import launch_lines

    config = json.loads((folder / "config.json").read_text())
    if not written:
        return launch_lines(config, target, model=model, method=flags)
    return launch_lines(config, target, folder=folder, gguf=gguf)


def _compare(folder: Path, probe, chosen, gguf, source, launch, *, quiet: bool):
    from ropekit.engines.compare import compare_folder

    report = (lambda message: None) if quiet else (lambda message: typer.echo(f"running {message} ...", err=True))
    with option_errors(model="--model"):
        return compare_folder(folder, probe, engines=chosen, gguf=gguf, source=source, progress=report, launch=launch)


def _print(rows) -> None:
    reference, engines = rows
    typer.echo(f"{reference.engine} {reference.version} (reference): {reference.detail}")
    for row in engines:
        typer.echo(f"\n{row.engine} {row.version or '(not installed)'}: {row.verdict}")
        typer.echo(f"  {row.detail}")
        typer.echo(f"  launch: {row.launch}")
