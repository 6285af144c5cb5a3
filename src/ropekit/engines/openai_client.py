"""A small client for an OpenAI-compatible completions server (vLLM, SGLang, llama.cpp's server, TGI), standard
library only: JSON over HTTP with a timeout, retries with exponential backoff, and one-line errors.

Retried: the server unreachable, a timeout, HTTP 429 and 5xx. Not retried: any other error reply (4xx), which is the
server refusing the request itself (its message is kept).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any


class ServerError(RuntimeError):
    """The server is unreachable, answered with an error, or cannot serve the evaluation (one line)."""


class OpenAIClient:
    """JSON requests to ``url`` (the base URL, e.g. ``http://127.0.0.1:8000/v1``).

    Args:
        timeout: seconds per request.
        retries: further attempts after a failure that may pass (unreachable, timeout, 429, 5xx).
        backoff: seconds before the first retry, doubled before each next one.
    """

    def __init__(self, url: str, *, timeout: float = 600.0, retries: int = 3, backoff: float = 1.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ServerError(f"not an http(s) URL: {url!r}")
        self.url = url.rstrip("/")
        self.timeout, self.retries, self.backoff = timeout, retries, backoff

    def get(self, path: str) -> dict[str, Any]:
        return self._request(path, None)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request(path, body)

    def _request(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        wait, last = self.backoff, ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(wait)
                wait *= 2
            try:
                return self._once(path, body)
            except urllib.error.HTTPError as error:
                detail = _error_message(error)
                if error.code != 429 and error.code < 500:
                    raise ServerError(f"{self.url}{path} answered HTTP {error.code}: {detail}") from None
                last = f"answered HTTP {error.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                reason = getattr(error, "reason", error)
                last = f"is unreachable ({reason})"
        raise ServerError(f"{self.url}{path} {last} after {self.retries + 1} attempts")

    def _once(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            headers={"Content-Type": "application/json"},
            method="GET" if data is None else "POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as reply:
            try:
                return json.loads(reply.read())
            except json.JSONDecodeError as error:
                raise ServerError(f"{self.url}{path} answered with something other than JSON ({error})") from None


def _error_message(error: urllib.error.HTTPError) -> str:
    """The server's own error message (OpenAI's ``{"error": {"message": ...}}``, FastAPI's ``detail``), one line."""
    try:
        payload = json.loads(error.read() or b"{}")
    except (json.JSONDecodeError, OSError):
        return error.reason or "no message"
    found = payload.get("error", payload.get("detail", payload)) if isinstance(payload, dict) else payload
    if isinstance(found, dict):
        found = found.get("message", found)
    return " ".join(str(found).split())[:300]
