"""The OpenAI-compatible client against a scripted server on 127.0.0.1: retries with backoff on what may pass
(unreachable, 5xx), none on a refusal (4xx, its message kept), one-line errors."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ropekit.eval.backends.openai_client import OpenAIClient, ServerError


@pytest.fixture
def scripted():
    """``scripted(replies)``: a server answering each request with the next ``(status, payload)``; yields its URL
    and the list of paths it was asked for."""
    servers = []

    def start(replies):
        asked = []

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                asked.append((self.path, json.loads(self.rfile.read(length)) if length else None))
                status, payload = replies.pop(0)
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1", asked

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_server_error_is_retried_then_answered(scripted) -> None:
    url, asked = scripted([(503, {"error": {"message": "loading"}}), (200, {"data": [{"id": "m"}]})])
    assert OpenAIClient(url, backoff=0.01).get("/models") == {"data": [{"id": "m"}]}
    assert [path for path, _ in asked] == ["/v1/models", "/v1/models"]


def test_a_refusal_is_not_retried_and_keeps_its_message(scripted) -> None:
    url, asked = scripted([(400, {"error": {"message": "prompt is too long\nfor this model"}})])
    with pytest.raises(ServerError, match=r"HTTP 400: prompt is too long for this model$"):
        OpenAIClient(url, backoff=0.01).post("/completions", {"prompt": [1, 2]})
    assert asked == [("/v1/completions", {"prompt": [1, 2]})]


def test_an_unreachable_server_is_one_line_after_the_retries() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIClient(f"http://127.0.0.1:{port}/v1", retries=2, backoff=0.01, timeout=2)
    with pytest.raises(ServerError, match=r"is unreachable .* after 3 attempts$") as caught:
        client.get("/models")
    assert "\n" not in str(caught.value)


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ServerError, match="not an http"):
        OpenAIClient("127.0.0.1:8000")
