"""GGUF out for ``ropekit extend`` and llama.cpp's load-time flags for ``extend`` and ``plan``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ropekit.cli.common import error_message, fail, print_json

#: the arguments the GGUF writer's messages name, as this command's options
_NAMES = {
    "model": "--model",
    "out": "--out",
    "force": "--force",
    "fixed_seq_len": "--fixed-seq-len",
    "factor": "--factor",
    "target_length": "--target-length",
}

#: output kinds of ``extend --format``
FORMATS = ("folder", "gguf")


def choose_format(out: Path, model: Path, chosen: str | None) -> str:
    """``gguf`` or ``folder``: ``--format`` if given, else from ``--out``'s suffix; a GGUF out needs a GGUF model."""
    if chosen is not None and chosen not in FORMATS:
        raise fail(f"--format must be one of {', '.join(FORMATS)}, got {chosen!r}")
    kind = chosen or ("gguf" if out.suffix.lower() == ".gguf" else "folder")
    if kind == "gguf" and model.suffix.lower() != ".gguf":
        raise fail(
            f"--format gguf needs a .gguf --model (its tensors are copied as they are), got {str(model)!r}; convert a "
            "folder with llama.cpp's convert_hf_to_gguf.py first (docs/llamacpp.md)"
        )
    return kind


def flags_for(rope: Any) -> tuple[list[str] | None, str]:
    """``(flags, text)``: llama.cpp's load-time flags for ``rope`` (a RopeConfig with its scaling), or ``None`` and
    the reason there are none."""
    from ropekit.integrations.gguf.llamacpp_rope import llamacpp_flags, to_llamacpp

    try:
        flags = llamacpp_flags(to_llamacpp(rope, rope_freqs=False, betas=True))
    except ValueError as error:
        return None, f"no llama.cpp flags: {error}"
    return flags, " ".join(flags)


def model_rope_of(model: Path, spec: Any, layer_types: tuple[str, ...] | None) -> Any:
    """The model's base RoPE with ``spec`` (for the flags): from the GGUF file's metadata or the folder's config."""
    from ropekit.config import RopeConfig

    if model.suffix.lower() == ".gguf":
        from ropekit.integrations.gguf.read_rope import read_file_rope

        file = read_file_rope(model)
        return RopeConfig(file.rope.n_rot, base=file.rope.freq_base, scaling=spec)
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import first_scaled_type, rope_of

    config = load_config(model)
    rope = rope_of(config, first_scaled_type(config, layer_types))
    return RopeConfig(rope.dim, base=rope.base, scaling=spec)


def extend_to_gguf(
    model: Path,
    spec: Any,
    out: Path,
    *,
    target: int | None,
    layer_types: tuple[str, ...] | None,
    force: bool,
    note: str | None,
    json_output: bool,
    original: int | None = None,
    method: str = "...",
) -> None:
    """Write the GGUF file and print what was written, with the line that launches each engine with the same RoPE
    (``method``: ``extend``'s method flags, for the lines that write a transformers folder first)."""
    from ropekit.cli.launch_view import launch_json, print_launch
    from ropekit.integrations.gguf.write_rope import extend_gguf

    try:
        result = extend_gguf(
            model, spec, out, target_length=target, original_length=original, layer_types=layer_types, force=force
        )
    except (ValueError, OSError) as error:
        raise fail(f"--format gguf: {error_message(error, _NAMES)}") from None
    form = result.form
    rope = model_rope_of(model, spec, layer_types)
    flags, _ = flags_for(rope)
    lines = _gguf_launch(rope, result, model, original or form.original_context_length, method)
    summary = {
        "out": str(result.out),
        "plan": note,
        "architecture": result.architecture,
        "context_length": result.context_length,
        "rope": {
            "freq_base": form.freq_base,
            "scaling_type": form.scaling_type,
            "factor": form.factor,
            "original_context_length": form.original_context_length,
            "attn_factor": form.attn_factor,
            "rope_freqs": list(form.freq_factors) if form.freq_factors is not None else None,
        },
        "llamacpp_flags": flags,
        "launch": launch_json(lines),
    }
    if json_output:
        print_json(summary)
        return
    if note:
        typer.echo(note)
    typer.echo(f"wrote {result.out} (context_length {result.context_length:,}; tensors copied as they are)")
    extra = " with rope_freqs (per-pair factors)" if form.freq_factors is not None else ""
    typer.echo(
        f"  rope: scaling.type {form.scaling_type}, factor {form.factor:g}, freq_base {form.freq_base:.9g}, "
        f"attn_factor {form.attn_factor:.9g}{extra}"
    )
    typer.echo(f"  launch it at {result.context_length:,} tokens:")
    print_launch(lines, typer.echo, indent="    ")


def _gguf_launch(rope: Any, result: Any, model: Path, original: int | None, method: str) -> dict[str, Any]:
    """The launch lines for a written GGUF file: llama.cpp and Ollama on it, the folder engines with the same RoPE
    in transformers' form (``rope_parameters`` as ``extend`` writes it into a folder)."""
    from ropekit.engines.launch import launch_lines, native_config

    served = result.context_length
    try:
        config, why = native_config(rope, original_length=original or served, target_length=served), None
    except ValueError as error:
        config, why = None, f"no transformers form: {error}"
    return launch_lines(config, served, gguf=result.out, model=model, method=method, why_no_config=why)


def plan_flags(
    names: list[str], *, head_dim: int, base: float, rotary_dim: int | None, factor: float, train_length: int
) -> dict[str, tuple[list[str] | None, str]]:
    """llama.cpp's load-time flags for each planned method (built as the plan builds it), or why there are none."""
    from ropekit.config import RopeConfig
    from ropekit.scaling.registry import SCALINGS

    result = {}
    for name in names:
        spec = SCALINGS[name].config_class.from_options(factor=factor, original_length=train_length)
        result[name] = flags_for(RopeConfig(head_dim, base=base, rotary_dim=rotary_dim, scaling=spec))
    return result
