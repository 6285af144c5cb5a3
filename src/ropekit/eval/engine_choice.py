"""Which engine answers an evaluation: ropekit's own forward pass (``torch``), llama.cpp on a GGUF file
(``llamacpp``) or an OpenAI-compatible completions server (``openai``), each an
:class:`~ropekit.eval.protocol.EvalModel`. :func:`ropekit.eval.loader.load_eval_model` takes the choice as its
``engine`` and ``server`` arguments and checks them here before anything loads.

Example:
    >>> from ropekit.errors import InvalidArgument
    >>> try:
    ...     check_engine("openai", Server())
    ... except InvalidArgument as error:
    ...     print(error.argument)
    url
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ropekit.errors import InvalidArgument

if TYPE_CHECKING:
    from ropekit.eval.protocol import EvalModel

#: the engines an evaluation runs on
EVAL_ENGINES = ("torch", "llamacpp", "openai")
#: seconds a whole request to a server may take by default
DEFAULT_TIMEOUT = 600.0
#: the most requests in flight at once
MAX_CONCURRENCY = 256
#: the longest request timeout, in seconds (a day)
MAX_TIMEOUT = 86400.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Server:
    """How the ``openai`` engine asks its server.

    Attributes:
        url: the server's base URL (e.g. ``http://127.0.0.1:8000/v1``).
        concurrency: requests in flight at once (1 to :data:`MAX_CONCURRENCY`).
        served_model: the id of the model to evaluate (needed where the server lists several).
        timeout: seconds a whole request may take, from connecting to the reply's end.
    """

    url: str | None = None
    concurrency: int = 4
    served_model: str | None = None
    timeout: float = DEFAULT_TIMEOUT


def check_engine(engine: str, server: Server, *, device_map: str | None = None, dtype: str = "auto") -> None:
    """``engine`` is one of :data:`EVAL_ENGINES`, and ``server``, ``device_map`` and ``dtype`` are what it takes:
    a server (with its URL) only for ``openai``, a device map and a dtype only for ``torch`` (the others run the
    file's own weights).

    Raises:
        InvalidArgument: about ``engine``, ``url``, ``concurrency``, ``device_map``, ``dtype``, ``served_model`` or
            ``timeout``.
    """
    served = engine == "openai"
    if engine not in EVAL_ENGINES:
        raise InvalidArgument("engine", engine, f"must be one of {', '.join(EVAL_ENGINES)}", allowed=EVAL_ENGINES)
    if served != bool(server.url):
        rule = "is needed with engine 'openai'" if served else f"applies to engine 'openai', not {engine!r}"
        raise InvalidArgument("url", server.url, rule)
    if not 1 <= server.concurrency <= MAX_CONCURRENCY:
        raise InvalidArgument("concurrency", server.concurrency, f"must be in [1, {MAX_CONCURRENCY}]")
    if engine != "torch" and device_map is not None:
        raise InvalidArgument("device_map", device_map, f"applies to engine 'torch', not {engine!r}")
    if engine != "torch" and dtype != "auto":
        raise InvalidArgument("dtype", dtype, f"applies to engine 'torch'; {engine!r} runs the file's own weights")
    if not served and server.served_model is not None:
        raise InvalidArgument("served_model", server.served_model, f"applies to engine 'openai', not {engine!r}")
    if not served and server.timeout != DEFAULT_TIMEOUT:
        raise InvalidArgument("timeout", server.timeout, f"applies to engine 'openai', not {engine!r}")
    if not (math.isfinite(server.timeout) and 0 < server.timeout <= MAX_TIMEOUT):
        raise InvalidArgument("timeout", server.timeout, f"must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    if server.served_model is not None and not server.served_model.strip():
        raise InvalidArgument("served_model", server.served_model, "must name a model the server lists")


def engine_model(spec: str | Path, engine: str, server: Server) -> EvalModel:
    """The evaluation model of a non-torch ``engine`` (checked by :func:`check_engine`): llama.cpp on the GGUF
    file ``spec``, or the server of ``server`` with ``spec`` (a GGUF file or transformers folder) as its tokenizer.

    Raises:
        InvalidArgument: about ``spec``: llama.cpp needs a ``.gguf`` file.
        ServerError: the server cannot be reached or does not serve the model (its ``argument`` says which).
        OSError, ValueError: the file or folder cannot be read.
    """
    if engine == "llamacpp":
        from ropekit.eval.backends.llamacpp import LlamaCppEvalModel

        if not str(spec).endswith(".gguf"):
            raise InvalidArgument("spec", str(spec), message=f"engine 'llamacpp' needs a .gguf file, got {str(spec)!r}")
        return LlamaCppEvalModel(str(spec))
    from ropekit.eval.backends.openai import OpenAIEvalModel

    options = {"concurrency": server.concurrency, "served_model": server.served_model, "timeout": server.timeout}
    return OpenAIEvalModel(str(spec), server.url, **options)
