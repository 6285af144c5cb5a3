"""A small client for an OpenAI-compatible completions server (vLLM, SGLang, llama.cpp's server, TGI), standard
library only: JSON over HTTP with a whole-request deadline, retries with exponential backoff, and one-line errors.

The deadline (``timeout``) bounds a request from connecting to the last byte of its reply: a watchdog shuts the
socket down when it passes, so a server that sends one byte a second, or stops mid-reply, cannot hold a run for
longer than that (a per-read socket timeout would wait forever on the first, and ``timeout`` times each read on the
second). Retried: the server unreachable, a timeout, a reply cut short, HTTP 429 and 5xx. Not retried: any other
error reply (4xx), which is the server refusing the request itself (its message is kept). A reply that is not one
JSON object is a one-line :class:`ServerError`.

Requests go straight to the URL's host (no HTTP proxy from the environment): these servers run beside the
evaluation.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any

#: what a request may raise that another attempt may pass (unreachable, refused, reset, cut short)
TRANSIENT = (OSError, http.client.HTTPException)


class ServerError(RuntimeError):
    """The server is unreachable, answered with an error, or cannot serve the evaluation (one line); ``argument``:
    the evaluation's argument it is about; ``status``: the HTTP status of the server's last error reply (``None``:
    no reply, or not an error reply); ``kind``: what went wrong where ropekit tells it apart (``"context"``: a
    prompt longer than the server's context), else ``None``."""

    argument = "url"

    def __init__(self, message: str, *, status: int | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class _HTTPStatus(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(code, detail)
        self.code, self.detail = code, detail


class OpenAIClient:
    """JSON requests to ``url`` (the base URL, e.g. ``http://127.0.0.1:8000/v1``).

    Args:
        timeout: seconds a whole request may take (connecting, sending, the reply's last byte).
        retries: further attempts after a failure that may pass (unreachable, timeout, cut short, 429, 5xx).
        backoff: seconds before the first retry, doubled before each next one.

    Raises:
        ServerError: ``url`` is not an http(s) URL, or ``timeout`` is not positive.
    """

    def __init__(self, url: str, *, timeout: float = 600.0, retries: int = 3, backoff: float = 1.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ServerError(f"not an http(s) URL: {url!r}")
        if not timeout > 0:
            raise ServerError(f"the timeout must be a positive number of seconds, got {timeout!r}")
        self.url = url.rstrip("/")
        self.timeout, self.retries, self.backoff = float(timeout), retries, backoff

    def get(self, path: str) -> dict[str, Any]:
        return self._request(self.url + path, None, self.retries)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request(self.url + path, body, self.retries)

    def get_root(self, path: str) -> dict[str, Any]:
        """``path`` beside the API rather than under it (llama.cpp's ``/props`` for ``.../v1``), one attempt."""
        root = self.url.removesuffix("/v1")
        return self._request(root + path, None, 0)

    def _request(self, url: str, body: dict[str, Any] | None, retries: int) -> dict[str, Any]:
        wait, last, status = self.backoff, "", None
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(wait)
                wait *= 2
            try:
                return _decode(url, self._once(url, body))
            except _HTTPStatus as error:
                if error.code != 429 and error.code < 500:
                    raise ServerError(f"{url} answered HTTP {error.code}: {error.detail}", status=error.code) from None
                last, status = f"answered HTTP {error.code}: {error.detail}", error.code
            except TimeoutError:
                last, status = f"did not answer within the {self.timeout:g} s timeout", None
            except http.client.IncompleteRead as error:
                got, expected = len(error.partial), len(error.partial) + (error.expected or 0)
                last, status = f"cut its reply short ({got} bytes of {expected})", None
            except TRANSIENT as error:
                status = None
                last = f"is unreachable ({getattr(error, 'reason', None) or error or type(error).__name__})"
        raise ServerError(f"{url} {last} after {retries + 1} attempts", status=status)

    def _once(self, url: str, body: dict[str, Any] | None) -> bytes:
        """The reply's body within the deadline; ``_HTTPStatus`` for an error status, ``TimeoutError`` past it."""
        parts = urllib.parse.urlsplit(url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        deadline = time.monotonic() + self.timeout
        connection = kind(parts.hostname, parts.port, timeout=self.timeout)
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            with contextlib.suppress(AttributeError, OSError):  # no socket yet, or already closed
                connection.sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on a slow or silent server

        connection.connect()  # within the timeout; the socket exists before the watchdog can need it
        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            data = None if body is None else json.dumps(body).encode()
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request(
                "GET" if data is None else "POST", target, body=data, headers={"Content-Type": "application/json"}
            )
            reply = connection.getresponse()
            chunks = []
            while chunk := reply.read1(65536):
                chunks.append(chunk)
                if expired.is_set() or time.monotonic() > deadline:
                    raise TimeoutError
            if reply.length:  # the server closed before the length it announced
                raise http.client.IncompleteRead(b"".join(chunks), reply.length)
            if reply.status >= 400:
                raise _HTTPStatus(reply.status, _error_message(b"".join(chunks), reply.reason))
            return b"".join(chunks)
        except TRANSIENT:
            if expired.is_set():
                raise TimeoutError from None
            raise
        finally:
            watchdog.cancel()
            connection.close()


def _decode(url: str, raw: bytes) -> dict[str, Any]:
    """The reply as one JSON object, else a one-line :class:`ServerError`."""
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ServerError(f"{url} answered with something other than JSON ({error})") from None
    if not isinstance(payload, dict):
        raise ServerError(f"{url} answered with JSON that is not an object (a {type(payload).__name__})")
    return payload


def _error_message(raw: bytes, reason: str) -> str:
    """The server's own error message (OpenAI's ``{"error": {"message": ...}}``, FastAPI's ``detail``), one line."""
    try:
        payload = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return reason or "no message"
    found = payload.get("error", payload.get("detail", payload)) if isinstance(payload, dict) else payload
    if isinstance(found, dict):
        found = found.get("message", found)
    return " ".join(str(found).split())[:300]
