"""``--engine``, ``--url``, ``--concurrency``, ``--served-model``, ``--timeout``: which engine answers an evaluation
(torch here, llama.cpp on a GGUF file, or an OpenAI-compatible completions server), as the ``engine`` and ``server``
arguments of :func:`ropekit.eval.loader.load_eval_model`, checked before anything loads."""

from __future__ import annotations

import dataclasses

import typer

from ropekit.cli.common import fail
from ropekit.eval.engine_choice import DEFAULT_TIMEOUT, EVAL_ENGINES, MAX_CONCURRENCY, MAX_TIMEOUT, Server

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
TIMEOUT = typer.Option(
    DEFAULT_TIMEOUT, help="--engine openai: seconds a whole request may take, from connecting to the reply's end."
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineChoice:
    """What ``--engine`` and its server options chose (``name``: one of
    :data:`~ropekit.eval.engine_choice.EVAL_ENGINES`)."""

    name: str = "torch"
    url: str | None = None
    concurrency: int = 4
    served_model: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def server(self) -> Server:
        """The ``server`` argument of :func:`~ropekit.eval.loader.load_eval_model`."""
        return Server(url=self.url, concurrency=self.concurrency, served_model=self.served_model, timeout=self.timeout)

    def check(self, *, device_map: str | None, dtype: str) -> None:
        """The one-line error of a bad choice (:func:`ropekit.eval.engine_choice.check_engine`), before anything
        loads."""
        from ropekit.errors import InvalidArgument
        from ropekit.eval.engine_choice import check_engine

        try:
            check_engine(self.name, self.server, device_map=device_map, dtype=dtype)
        except InvalidArgument as error:
            raise fail(self._message(error.argument)) from None

    def _message(self, argument: str) -> str:
        """The message of a refusal about ``argument``, in the options' words."""
        name, served = self.name, self.name == "openai"
        messages = {
            "engine": f"--engine must be one of {', '.join(EVAL_ENGINES)}, got {name!r}",
            "url": "--engine openai needs --url (the server's base URL, e.g. http://127.0.0.1:8000/v1)"
            if served
            else f"--url applies to --engine openai, not --engine {name}",
            "concurrency": f"--concurrency must be in [1, {MAX_CONCURRENCY}], got {self.concurrency}",
            "device_map": f"--device-map applies to --engine torch, not --engine {name}",
            "dtype": f"--dtype applies to --engine torch; --engine {name} runs the file's own weights",
            "served_model": "--served-model must name a model the server lists, got an empty name"
            if served
            else f"--served-model applies to --engine openai, not --engine {name}",
            "timeout": f"--timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {self.timeout:g}"
            if served
            else f"--timeout applies to --engine openai, not --engine {name}",
        }
        return messages[argument]
