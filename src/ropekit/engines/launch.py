"""The line that launches each engine with one RoPE: one function for ``engines``, ``extend`` and ``plan``.

:func:`launch_lines` takes a config.json-shaped dict (its ``rope_parameters``, ``max_position_embeddings`` and head
size: what ``extend`` writes, or :func:`native_config` for a RoPE not written yet), the length to serve and the files
at hand, and gives per engine a :class:`Launch`:

* transformers and MLX-LM load a folder whose config.json holds the RoPE (MLX-LM reads only ``rope_theta`` and
  ``rope_scaling``, which ``extend`` writes beside ``rope_parameters``);
* vLLM (``--hf-overrides``) and SGLang (``--json-model-override-args``) set ``rope_parameters`` and
  ``max_position_embeddings`` on any transformers folder of the model, the unextended one included: vLLM refuses a
  ``--max-model-len`` above ``max_position_embeddings`` (times ``factor`` for linear and dynamic only), so the
  override carries both;
* llama.cpp takes load-time flags on the unextended GGUF where flags can say the RoPE
  (:func:`~ropekit.integrations.gguf.llamacpp_rope.llamacpp_flags`), else the GGUF ``extend`` writes (per-pair factors
  in ``rope_freqs``); a RoPE that follows the length (dynamic NTK, LongRoPE's two lists) has no llama.cpp form;
* Ollama reads RoPE only from a GGUF file's metadata: a Modelfile with the GGUF ``extend`` writes and ``num_ctx``.

Placeholders where a path is not known: ``MODEL`` (the unextended model), ``OUT`` (the folder ``extend`` writes),
``MODEL.gguf`` and ``OUT.gguf``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the engines, in the order lines are printed
LAUNCH_ENGINES = ("transformers", "vLLM", "SGLang", "MLX-LM", "llama.cpp", "Ollama")


@dataclass(frozen=True)
class Launch:
    """How one engine runs the RoPE.

    Attributes:
        engine: the engine's name.
        command: the shell line (transformers: the Python call), or ``None`` when the engine has no form for it.
        alternative: another line that runs the same RoPE (``None``: none).
        note: what the lines assume, or why there is no line (``None``: nothing to add).
    """

    engine: str
    command: str | None
    alternative: str | None = None
    note: str | None = None

    def text(self) -> str:
        """One line: the command, the alternative and the note."""
        parts = [self.command or "no launch line"]
        if self.alternative:
            parts.append(f"(or: {self.alternative})")
        if self.note:
            parts.append(f"({self.note})")
        return "   ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "alternative": self.alternative, "note": self.note}


def overrides(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys vLLM's ``--hf-overrides`` and SGLang's ``--json-model-override-args`` set: the RoPE as
    ``rope_parameters`` and ``max_position_embeddings``, as in ``config`` (a config with only the older keys, as
    hub configs written before transformers 5 are: its ``rope_parameters`` as transformers builds them)."""
    params = config.get("rope_parameters")
    if params is None:
        params = _from_older_keys(config)
    elif key_conflict(config) is not None:  # transformers reads the older keys, so the engines run those
        kept = {key: params[key] for key in ("partial_rotary_factor",) if key in params}
        params = {**_from_older_keys(config), **kept}
    return {"rope_parameters": params, "max_position_embeddings": config.get("max_position_embeddings")}


def key_conflict(config: Mapping[str, Any]) -> str | None:
    """Where ``config``'s ``rope_parameters`` and its older keys (``rope_theta``, ``rope_scaling``) say different
    RoPEs, a line naming both values; transformers 5 reads the older keys then, and so do vLLM and SGLang (through
    transformers' config) and MLX-LM. ``None`` where they agree, one form is absent, or the RoPE is per layer
    type."""
    params = config.get("rope_parameters")
    if not isinstance(params, Mapping) or "rope_type" not in params:
        return None
    if "rope_theta" not in config and "rope_scaling" not in config:
        return None
    older = _from_older_keys(config)
    # the keys both forms give (one form may carry a key the other has no name for: mscale beside attention_factor)
    keys = {"rope_type"} | ({"rope_theta"} if "rope_theta" in config else set())
    if "rope_scaling" in config:
        keys |= (set(older) & set(params)) - {"rope_theta"}
    differ = sorted(key for key in keys if params.get(key) != older.get(key))
    if not differ:
        return None
    theirs = {key: params.get(key) for key in differ}
    read = {key: older.get(key) for key in differ}
    return (
        f"config.json's rope_parameters and its rope_theta/rope_scaling disagree: rope_parameters say {theirs}, "
        f"the older keys {read}; transformers (and vLLM, SGLang, MLX-LM) read the older keys"
    )


def _from_older_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """``rope_parameters`` from ``rope_theta``, ``rope_scaling`` (``type`` read as ``rope_type``) and Gemma 3's
    ``rope_local_base_freq``, as transformers' ``convert_rope_params_to_dict`` builds them."""
    scaling = dict(config.get("rope_scaling") or {})
    kind = scaling.pop("type", None)
    params = {**scaling, "rope_type": scaling.get("rope_type") or kind or "default"}
    params["rope_theta"] = config.get("rope_theta", 10000.0)
    if "rope_local_base_freq" not in config:
        return params
    return {
        "full_attention": params,
        "sliding_attention": {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]},
    }


def llamacpp_form(config: Mapping[str, Any]) -> tuple[list[str] | None, str | None, str | None]:
    """``(flags, why no flags, why no form)`` of ``config``'s RoPE in llama.cpp: its load-time flags (``None`` where
    only a GGUF with per-pair factors says it), and why not; ``why no form`` when llama.cpp cannot run it at all."""
    from ropekit.integrations.gguf.llamacpp_rope import llamacpp_flags, to_llamacpp
    from ropekit.integrations.hf.model_config import first_scaled_type, rope_of

    rope = rope_of(dict(config), first_scaled_type(dict(config), None))
    try:
        to_llamacpp(rope, rope_freqs=True, betas=False)
    except ValueError as error:
        return None, None, str(error)
    try:
        return llamacpp_flags(to_llamacpp(rope, rope_freqs=False, betas=True)), None, None
    except ValueError as error:
        return None, f"no llama.cpp flags: {error}", None


def native_config(rope: Any, *, original_length: int, target_length: int) -> dict[str, Any]:
    """The config.json keys ``extend`` writes for ``rope`` (a RopeConfig with its scaling) served at
    ``target_length``: ``head_dim``, ``rope_parameters`` and ``max_position_embeddings`` (dynamic NTK's: its L).

    Raises:
        ValueError: transformers has no form for ``rope`` (:func:`~ropekit.integrations.hf.native_rope.native_rope`).
    """
    from ropekit.integrations.hf.native_rope import native_rope

    native = native_rope(rope, original_length=original_length)
    length = native.max_position_embeddings or target_length
    return {"head_dim": rope.head_dim, "rope_parameters": native.rope_parameters, "max_position_embeddings": length}


def launch_lines(
    config: Mapping[str, Any] | None,
    target_length: int,
    *,
    folder: str | Path | None = None,
    gguf: str | Path | None = None,
    model: str | Path | None = None,
    method: str = "...",
    why_no_config: str | None = None,
) -> dict[str, Launch]:
    """Every engine's launch line (:data:`LAUNCH_ENGINES` order) for ``config``'s RoPE served at ``target_length``
    tokens.

    Args:
        config: a config.json-shaped dict with ``rope_parameters``, ``max_position_embeddings`` and the head size
            (``None``: transformers has no form for the RoPE, ``why_no_config`` says why; only GGUF lines).
        target_length: the length to serve (``--max-model-len``, ``--context-length``, ``-c``, ``num_ctx``).
        folder: a transformers folder whose config.json holds the RoPE (``extend``'s output), if there is one.
        gguf: a GGUF file whose metadata holds the RoPE (``extend --out X.gguf``), if there is one.
        model: the unextended model, a folder or a ``.gguf`` file (``None``: ``MODEL``).
        method: ``extend``'s method flags, for the lines that write a file first.
    """
    source = str(model) if model is not None else "MODEL"
    is_gguf = source.lower().endswith(".gguf")
    lines = {}
    if config is None:
        why = why_no_config or "transformers has no form for this RoPE"
        lines = {name: Launch(name, None, note=why) for name in LAUNCH_ENGINES[:4]}
    else:
        lines.update(_folder_lines(config, target_length, folder, source, is_gguf, method))
    lines.update(_gguf_lines(config, target_length, gguf, source if is_gguf else "MODEL.gguf", method))
    return {name: lines[name] for name in LAUNCH_ENGINES}


def _folder_lines(
    config: Mapping[str, Any], target: int, folder: str | Path | None, source: str, is_gguf: bool, method: str
) -> dict[str, Launch]:
    """transformers, vLLM, SGLang and MLX-LM."""
    written = str(folder) if folder is not None else "OUT"
    write = None if folder is not None else f"OUT: ropekit extend --model {source} {method} --out OUT"
    served = str(folder) if folder is not None else ("MODEL_FOLDER" if is_gguf else source)
    why_served = None
    if folder is None:
        what = "MODEL_FOLDER: this model as a transformers folder or hub id" if is_gguf else "the unextended model"
        why_served = f"{what}; the override sets the RoPE"
    override = shlex.quote(json.dumps(overrides(config), separators=(",", ":")))
    mlx_note = write
    if folder is not None and not _has_older_keys(config):
        mlx_note = "this config.json has no rope_theta/rope_scaling: MLX-LM runs base 10,000 without scaling"
    return {
        "transformers": Launch("transformers", f"AutoModelForCausalLM.from_pretrained({written!r})", note=write),
        "vLLM": Launch(
            "vLLM",
            f"vllm serve {shlex.quote(served)} --hf-overrides {override} --max-model-len {target}",
            note=why_served,
        ),
        "SGLang": Launch(
            "SGLang",
            f"python -m sglang.launch_server --model-path {shlex.quote(served)} --json-model-override-args "
            f"{override} --context-length {target}",
            note=why_served,
        ),
        "MLX-LM": Launch(
            "MLX-LM",
            f"mlx_lm.server --model {shlex.quote(written)}",
            alternative=f"mlx_lm.generate --model {shlex.quote(written)} --prompt TEXT",
            note=mlx_note,
        ),
    }


def _has_older_keys(config: Mapping[str, Any]) -> bool:
    """Whether a reader of ``rope_theta``/``rope_scaling`` (MLX-LM) finds the RoPE in ``config``."""
    params = config.get("rope_parameters") or {}
    plain = params.get("rope_type", "default") == "default" and params.get("rope_theta", 10000.0) == 10000.0
    return plain or "rope_theta" in config or "rope_scaling" in config


def _gguf_lines(
    config: Mapping[str, Any] | None, target: int, gguf: str | Path | None, source: str, method: str
) -> dict[str, Launch]:
    """llama.cpp and Ollama."""
    flags, why_flags, why_none = (None, None, None) if config is None else llamacpp_form(config)
    if why_none is not None:
        return {
            "llama.cpp": Launch("llama.cpp", None, note=f"no llama.cpp form: {why_none}"),
            "Ollama": Launch("Ollama", None, note="no llama.cpp form (Ollama runs llama.cpp)"),
        }
    on_source = None
    if flags is not None:
        on_source = f"llama-server -m {shlex.quote(source)} -c {target} {shlex.join(flags)}"
    write = f"ropekit extend --model {shlex.quote(source)} {method} --out OUT.gguf"
    file = str(gguf) if gguf is not None else "OUT.gguf"
    from_file = f"llama-server -m {shlex.quote(file)} -c {target}"
    if gguf is not None:
        llama = Launch("llama.cpp", from_file, alternative=on_source, note=why_flags)
    elif on_source is not None:
        llama = Launch("llama.cpp", on_source, alternative=f"{write} && {from_file}")
    else:
        llama = Launch("llama.cpp", f"{write} && {from_file}", note=why_flags)
    modelfile = f"printf 'FROM %s\\nPARAMETER num_ctx %s\\n' {shlex.quote(file)} {target} > Modelfile"
    ollama_note = "Ollama reads RoPE only from the GGUF's metadata"
    if gguf is None:
        ollama_note += f"; OUT.gguf: {write}"
    ollama = Launch("Ollama", f"{modelfile} && ollama create NAME -f Modelfile", note=ollama_note)
    return {"llama.cpp": llama, "Ollama": ollama}
