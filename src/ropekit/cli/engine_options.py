"""``--engine``, ``--url``, ``--concurrency``, ``--served-model``, ``--timeout``: which engine answers an evaluation
(torch here, llama.cpp on a GGUF file, or an OpenAI-compatible completions server), checked before anything loads."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import typer

from ropekit.cli.common import fail

#: what ``--engine`` accepts
EVAL_ENGINES = ("torch", "llamacpp", "openai")

ENGINE = typer.Option(
    "torch",
    help="torch (ropekit's own forward pass), llamacpp (the --model GGUF file through llama-cpp-python) or openai "
    "(an OpenAI-compatible completions server at --url; --model is then the served model's GGUF file or "
    "transformers folder, for its tokenizer).",
)
URL = typer.Option(None, help="--engine openai: the server's base URL, e.g. http://127.0.0.1:8000/v1.")
CONCURRENCY = typer.Option(4, help="--engine openai: requests in flight at once.")
SERVED_MODEL = typer.Option(
    None, help="--engine openai: the id of the model to evaluate (needed where the server lists several)."
)
#: seconds a whole request to the server may take by default
DEFAULT_TIMEOUT = 600.0
TIMEOUT = typer.Option(
    DEFAULT_TIMEOUT, help="--engine openai: seconds a whole request may take, from connecting to the reply's end."
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineChoice:
    """What ``--engine`` and its server options chose (``name``: one of :data:`EVAL_ENGINES`)."""

    name: str = "torch"
    url: str | None = None
    concurrency: int = 4
    served_model: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def check(self, *, device_map: str | None, dtype: str) -> None:
        """The one-line error of a bad choice, before anything loads."""
        check_engine(self.name, self.url, self.concurrency, device_map=device_map, dtype=dtype)
        if self.name != "openai" and self.served_model is not None:
            raise fail(f"--served-model applies to --engine openai, not --engine {self.name}")
        if self.name != "openai" and self.timeout != DEFAULT_TIMEOUT:
            raise fail(f"--timeout applies to --engine openai, not --engine {self.name}")
        if not (math.isfinite(self.timeout) and 0 < self.timeout <= 86400):
            raise fail(f"--timeout must be a number of seconds in (0, 86400], got {self.timeout:g}")
        if self.served_model is not None and not self.served_model.strip():
            raise fail("--served-model must name a model the server lists, got an empty name")


def check_engine(engine: str, url: str | None, concurrency: int, *, device_map: str | None, dtype: str) -> None:
    """The one-line error of a bad engine choice, before anything loads."""
    if engine not in EVAL_ENGINES:
        raise fail(f"--engine must be one of {', '.join(EVAL_ENGINES)}, got {engine!r}")
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


def load_engine_model(choice: EngineChoice, model: str) -> Any:
    """The evaluation model of a non-torch engine (its errors name ``--model``, ``--url`` or ``--served-model``)."""
    if choice.name == "llamacpp":
        from ropekit.eval.backends.llamacpp import LlamaCppEvalModel

        if not model.endswith(".gguf"):
            raise fail(f"--engine llamacpp needs --model to be a .gguf file, got {model!r}")
        try:
            return LlamaCppEvalModel(model)
        except (OSError, ValueError) as error:
            raise fail(f"--model {model!r}: {error}") from error
    from ropekit.eval.backends.openai import OpenAIEvalModel, ServerError

    try:
        return OpenAIEvalModel(
            model, choice.url, concurrency=choice.concurrency, served_model=choice.served_model, timeout=choice.timeout
        )
    except ServerError as error:
        flag = "--served-model" if error.argument == "served_model" else f"--url {choice.url}"
        raise fail(f"{flag}: {error}") from error
    except (OSError, ValueError) as error:
        raise fail(f"--model {model!r}: {error}") from error
