"""Loading a transformers model, its ``config.json`` and its tokenizer offline: one place for every command.

A model is a folder or a ``.gguf`` file (:func:`source_of` gives the ``from_pretrained`` arguments); transformers
dequantises a GGUF file, and its RoPE is then the one llama.cpp runs
(:func:`~ropekit.integrations.gguf.read_rope.apply_gguf_rope`: transformers drops ``rope.scaling.*``). Every GGUF
file is checked (:func:`checked_gguf`: sizes bounded by the file, keys in range) before transformers reads it. The
GGUF-to-config translation lives here: :func:`load_config` reads the config from the header
(:mod:`~ropekit.integrations.hf.gguf_config`) where that is checked equal to transformers', and
:func:`transformers_config` is transformers' whole config, for building a model or writing its ``config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ropekit.errors import InvalidArgument, MissingFile

#: files one of which a model folder needs for its tokenizer (``AutoTokenizer`` silently builds an empty one without)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer.tiktoken")


def source_of(model: str | Path) -> tuple[Path, dict[str, Any]]:
    """``(folder, options)``: the ``from_pretrained`` arguments that read ``model`` offline — a model folder, or a
    ``.gguf`` file (``gguf_file=`` its name in its folder; transformers dequantises it)."""
    path = Path(model)
    if path.suffix.lower() == ".gguf":
        return path.parent, {"gguf_file": path.name, "local_files_only": True}
    return path, {"local_files_only": True}


def load_config(model: str | Path) -> dict[str, Any]:
    """The ``config.json`` dict of a model folder, or of a ``.gguf`` file as transformers would build it, with the
    RoPE llama.cpp runs (:func:`~ropekit.integrations.gguf.read_rope.apply_gguf_rope`).

    A ``.gguf`` file's header is checked first (every size within the file) and, for the architectures in
    :data:`~ropekit.integrations.hf.gguf_config.HEADER_ARCHITECTURES`, the config is read from it alone (the keys
    ropekit reads: RoPE, shapes, layout; no vocabulary, no transformers); other architectures go through transformers.
    Where a model is built or its ``config.json`` written, use :func:`transformers_config` (every key).

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``model``) no such folder or file, or no
            ``config.json`` in the folder.
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` about ``model``) ``config.json`` is not a JSON
            object, the ``.gguf`` file is not a whole GGUF file, or a key of its header is out of range (named).
    """
    path = Path(model)
    if path.suffix.lower() != ".gguf":
        return _folder_config(path)
    from ropekit.integrations.gguf.file import check_gguf
    from ropekit.integrations.gguf.read_rope import apply_gguf_rope
    from ropekit.integrations.hf.gguf_config import gguf_config

    header = check_gguf(path)  # empty, not GGUF, truncated, hostile sizes: one line before anything else reads it
    config = gguf_config(header)
    if config is None:
        return transformers_config(path)
    return apply_gguf_rope(config, path, reader=header)


def transformers_config(model: str | Path) -> dict[str, Any]:
    """Every key of the config transformers builds for ``model`` (a folder's ``config.json`` as it is), with the RoPE
    llama.cpp runs for a ``.gguf`` file (checked first by :func:`checked_gguf`): for building the model or writing its
    ``config.json``.

    Raises:
        FileNotFoundError, ValueError: as :func:`load_config`.
    """
    path = Path(model)
    folder, options = source_of(path)
    if "gguf_file" not in options:
        return _folder_config(path)
    header = checked_gguf(path)  # one line naming the key, before transformers reads the file
    from transformers import AutoConfig

    from ropekit.integrations.gguf.read_rope import apply_gguf_rope

    config = AutoConfig.from_pretrained(folder, **options).to_dict()
    config = apply_gguf_rope(config, path, reader=header)  # the RoPE llama.cpp runs
    return {key: value for key, value in config.items() if not key.startswith("_")}  # _name_or_path: local


def checked_gguf(path: str | Path, option: str = "model") -> Any:
    """The header of the GGUF file ``path`` once everything a transformers load reads from it is checked: every size
    within the file (:func:`~ropekit.integrations.gguf.file.check_gguf`), its RoPE keys and, for the architectures
    read here, its shape keys: a hostile file is one line naming the key, never a traceback inside transformers.

    Raises:
        FileNotFoundError, ValueError: (about ``option``) as :func:`load_config`.
    """
    from ropekit.integrations.gguf.file import check_gguf
    from ropekit.integrations.gguf.read_rope import read_file_rope
    from ropekit.integrations.hf.gguf_config import gguf_config

    header = check_gguf(path, option)
    gguf_config(header)
    read_file_rope(path, reader=header)
    return header


def _folder_config(path: Path) -> dict[str, Any]:
    """The ``config.json`` of a model folder, as a dict."""
    if not (path / "config.json").is_file():
        raise MissingFile(
            "model",
            str(path),
            message=f"model {str(path)!r}: no config.json there (a transformers folder or a .gguf file)",
        )
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        message = f"model {str(path)!r}: config.json is not valid JSON ({error})"
        raise InvalidArgument("model", str(path), message=message) from None
    if not isinstance(config, dict):
        message = f"model {str(path)!r}: config.json must hold a JSON object, got {type(config).__name__}"
        raise InvalidArgument("model", str(path), message=message)
    return config


def has_tokenizer(model: str | Path) -> bool:
    """Whether ``model`` carries a tokenizer: a ``.gguf`` file always does, a folder when it holds one of
    :data:`TOKENIZER_FILES`."""
    folder, options = source_of(model)
    return "gguf_file" in options or any((folder / name).is_file() for name in TOKENIZER_FILES)


def load_tokenizer(model: str | Path):
    """The model's own tokenizer (offline), or ``None`` when it has none (:func:`has_tokenizer`)."""
    if not has_tokenizer(model):
        return None
    from transformers import AutoTokenizer

    folder, options = source_of(model)
    return AutoTokenizer.from_pretrained(folder, **options)


def load_model(model: str | Path, *, dtype: Any = None, attention: str | None = None):
    """``(model, tokenizer or None)`` from a transformers folder or a ``.gguf`` file, offline, in ``dtype``
    (default float32), with the ``attention`` implementation (default: transformers' own choice, sdpa where it runs
    for the architecture).

    A GGUF model is dequantised by transformers, which then marks it quantized (not trainable with ``.float()``, not
    savable); its weights are moved into a plain model built from the same config, which is both.
    """
    import torch
    from transformers import AutoModelForCausalLM

    folder, options = source_of(model)
    header = checked_gguf(model) if "gguf_file" in options else None
    load: dict[str, Any] = {**options, "dtype": dtype or torch.float32}
    if attention is not None:
        load["attn_implementation"] = attention
    loaded = AutoModelForCausalLM.from_pretrained(folder, **load)
    if "gguf_file" in options:
        from ropekit.integrations.gguf.read_rope import apply_gguf_rope

        apply_gguf_rope(
            loaded.config, model, reader=header
        )  # the RoPE llama.cpp runs (transformers drops rope.scaling.*)
        plain = AutoModelForCausalLM.from_config(
            loaded.config, dtype=load["dtype"], attn_implementation=loaded.config._attn_implementation
        )
        plain.load_state_dict(loaded.state_dict())
        plain.tie_weights()
        loaded = plain.eval()
    return loaded, load_tokenizer(model)
