"""``--engine``, ``--url``, ``--concurrency``: which engine answers an evaluation (torch here, llama.cpp on a GGUF
file, or an OpenAI-compatible completions server), checked before anything loads."""

from __future__ import annotations

from typing import Any

import typer

from ropekit.cli.common import fail

#: what ``--engine`` accepts
ENGINES = ("torch", "llamacpp", "openai")

ENGINE = typer.Option(
    "torch",
    help="torch (ropekit's own forward pass), llamacpp (the --model GGUF file through llama-cpp-python) or openai "
    "(an OpenAI-compatible completions server at --url; --model is then the tokenizer's GGUF file or folder).",
)
URL = typer.Option(None, help="--engine openai: the server's base URL, e.g. http://127.0.0.1:8000/v1.")
CONCURRENCY = typer.Option(4, help="--engine openai: requests in flight at once.")


def check_engine(engine: str, url: str | None, concurrency: int, *, device_map: str | None, dtype: str) -> None:
    """The one-line error of a bad engine choice, before anything loads."""
    if engine not in ENGINES:
        raise fail(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "openai" and not url:
        raise fail("--engine openai needs --url (the server's base URL, e.g. http://127.0.0.1:8000/v1)")
    if engine != "openai" and url:
        raise fail(f"--url applies to --engine openai, not --engine {engine}")
    if not 1 <= concurrency <= 256:
        raise fail(f"--concurrency must be in [1, 256], got {concurrency}")
    if engine != "torch" and device_map is not None:
        raise fail(f"--device-map applies to --engine torch, not --engine {engine}")
    if engine != "torch" and dtype != "auto":
        raise fail(f"--dtype applies to --engine torch; --engine {engine} runs the file's own weights")


def load_engine_model(engine: str, model: str, url: str | None, concurrency: int) -> Any:
    """The evaluation model of a non-torch engine (its errors name ``--model`` or ``--url``)."""
    if engine == "llamacpp":
        from ropekit.engines.llamacpp_eval import LlamaCppEvalModel

        if not model.endswith(".gguf"):
            raise fail(f"--engine llamacpp needs --model to be a .gguf file, got {model!r}")
        try:
            return LlamaCppEvalModel(model)
        except (OSError, ValueError) as error:
            raise fail(f"--model {model!r}: {error}") from error
    from ropekit.engines.openai_eval import OpenAIEvalModel, ServerError

    try:
        return OpenAIEvalModel(model, url, concurrency=concurrency)
    except ServerError as error:
        raise fail(f"--url {url}: {error}") from error
    except (OSError, ValueError) as error:
        raise fail(f"--model {model!r}: {error}") from error
