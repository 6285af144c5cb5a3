"""A scripted OpenAI-compatible completions server in the test process, on 127.0.0.1 (no engine, no model): it lists
its models on ``/v1/models``, reports llama.cpp-style ``/props`` (``props=False``: none, as llama-cpp-python's server),
and answers ``/v1/completions`` with a text that names the server (``tag``) and the prompt's length, so answers from
two servers are told apart. A prompt longer than its context (``n_ctx``, with the budget) is refused with HTTP 400.

The fixed prompt ropekit asks at the start of a journalled run (the shipped held-out text's first tokens, through the
byte tokenizer of :func:`tokenizer_folder`) is answered as its "computation" decides: a text naming
``rope_freq_scale`` and, where asked, log-probabilities from it (plus ``logprob_shift``, a server's nondeterminism).
Those requests are kept in ``computed``, apart from the questions in ``asked``.

``script(path, body)`` may take a request over: return ``None`` for the default reply, ``(status, object)`` for a
JSON reply, ``(status, bytes)`` for a raw body (``Content-Length`` its length, or ``announce`` bytes given in a
``(status, bytes, announce)`` triple, to cut a reply short), or a callable given the handler, which writes the reply
itself (a server that drips).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def tokenizer_folder(path: Path) -> Path:
    """The byte-level Llama's ``config.json`` and byte tokenizer (no weights): what ``--model`` names for a server."""
    from helpers.hf_models import byte_llama, byte_tokenizer, random_hf_config

    random_hf_config("llama", **byte_llama()).save_pretrained(path)
    byte_tokenizer().save_pretrained(path)
    return path


def fixed_prompt(prompt: Any) -> bool:
    """Whether ``prompt`` (byte-tokenizer ids or text) starts the shipped held-out text, as the fixed prompt does."""
    from ropekit.model.corpus import heldout_bytes

    head = heldout_bytes()[:32]
    if isinstance(prompt, str):
        return prompt.encode()[:32] == head
    return isinstance(prompt, list) and prompt[:32] == _byte_ids(head)


def _byte_ids(data: bytes) -> list[int]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    order = {byte: i for i, byte in enumerate(bytes_to_unicode())}
    return [order[byte] for byte in data]


class FakeServer:
    """The server (a context manager); ``asked`` holds each completion request's body."""

    def __init__(
        self,
        models: tuple[str, ...] = ("fake-model",),
        *,
        tag: str = "A",
        n_ctx: int = 4096,
        rope_freq_base: float = 10000.0,
        props: bool = True,
        rope_freq_scale: float = 1.0,
        logprob_shift: float = 0.0,
        script: Callable[[str, dict], Any] | None = None,
    ) -> None:
        self.models, self.tag, self.n_ctx, self.rope_freq_base = models, tag, n_ctx, rope_freq_base
        self.props, self.rope_freq_scale, self.logprob_shift = props, rope_freq_scale, logprob_shift
        self.script = script
        self.asked: list[dict] = []
        self.computed: list[dict] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reply(self, path: str, body: dict) -> tuple[int, Any]:
        """The default reply to ``path``."""
        if path.endswith("/models"):
            return 200, {"object": "list", "data": [{"id": m, "object": "model", "created": 1} for m in self.models]}
        if path == "/props" and self.props:
            settings = {"n_ctx": self.n_ctx, "params": {"rope_freq_base": self.rope_freq_base}}
            return 200, {"default_generation_settings": settings, "model_path": "/models/m.gguf"}
        if path.endswith("/completions"):
            prompt = body["prompt"]
            count = len(prompt) if isinstance(prompt, list) else len(prompt.encode())
            if count + body.get("max_tokens", 0) > self.n_ctx:
                return 400, {"error": {"message": f"{count} tokens exceed the context of {self.n_ctx}"}}
            fixed = fixed_prompt(prompt)
            with self.lock:
                (self.computed if fixed else self.asked).append(body)
            choice = {"index": 0, "text": f"{self.tag}{count}", "finish_reason": "length"}
            if fixed:
                choice = {**choice, **self.computation(body)}
            usage = {"prompt_tokens": count, "completion_tokens": 2, "total_tokens": count + 2}
            return 200, {"object": "text_completion", "model": body.get("model"), "choices": [choice], "usage": usage}
        return 404, {"error": {"message": f"no route {path}"}}

    def computation(self, body: dict) -> dict:
        """The fixed prompt's continuation as this server's RoPE computes it (log-probabilities where asked)."""
        budget = body.get("max_tokens", 1)
        found: dict[str, Any] = {"text": f" rope scale {self.rope_freq_scale:g}"}
        if body.get("logprobs"):
            values = [-0.1 * (i + 1) / self.rope_freq_scale + self.logprob_shift for i in range(budget)]
            found["logprobs"] = {"token_logprobs": values, "tokens": [f"t{i}" for i in range(budget)]}
        return found

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                found = server.script(self.path, body) if server.script is not None else None
                if callable(found):
                    found(self)
                    return
                status, payload, *announce = found if found is not None else server.reply(self.path, body)
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(announce[0] if announce else len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _serve

            def log_message(self, *args: object) -> None:
                pass

        return Handler
