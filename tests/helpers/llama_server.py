"""llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) on a free loopback port, for the
tests that evaluate through a served model: started with a GGUF file, one thread, ``N_CTX`` positions, and stopped
(or killed, to test a server that dies), with the server's own further ``options`` (``--rope_freq_scale 0.125``). Only 127.0.0.1 traffic; the tests that use it skip without
``llama-cpp-python[server]`` (:data:`SERVER_PACKAGES`).

``ids=True`` starts it through ``ids_server.py`` beside it, which lets it take a completion prompt as token ids,
as llama.cpp's C++ server, vLLM and SGLang do; ``ids=False`` is the server as installed (prompts as text only)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: what ``llama-cpp-python[server]`` installs beside ``llama_cpp`` (``pytest.importorskip`` each)
SERVER_PACKAGES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
#: the server's context in tokens
N_CTX = 2048
IDS_SERVER = Path(__file__).with_name("ids_server.py")


class Server:
    """llama-cpp-python's server on a free loopback port; ``start`` and ``stop`` (a server that dies)."""

    def __init__(
        self, model: Path, log: Path, *, ids: bool = True, logits_all: bool = False, options: tuple[str, ...] = ()
    ) -> None:
        self.ids, self.logits_all, self.options = ids, logits_all, options
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.model, self.log, self.process = model, log, None

    def start(self) -> None:
        launcher = [str(IDS_SERVER)] if self.ids else ["-m", "llama_cpp.server"]
        command = [sys.executable, *launcher, "--model", str(self.model), "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--n_ctx", str(N_CTX), "--n_threads", "1", "--n_threads_batch", "1"]
        command += ["--logits_all", str(self.logits_all).lower(), "--verbose", "false", *self.options]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self.log.open("a"), env=env)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/models", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("the server did not answer within 90 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
