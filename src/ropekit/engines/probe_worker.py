"""One long-lived process per probe script in the vLLM environment, asked one request at a time.

Starting the vLLM environment's interpreter and importing vLLM costs about 10 CPU-seconds; a comparison asks each
engine once per extension, so a conformance run (architectures × methods) would spend most of its time there. A
probe script (:mod:`ropekit.engines._vllm_probe`, :mod:`ropekit.engines._sglang_probe`) reads one JSON request a
line and writes each reply as one line starting with :data:`MARK` (anything else the engine prints is skipped), so
one process answers every request of a run. Its stderr goes to a file, read only when the process dies. The
processes end with this one (``atexit``); :func:`close` ends them sooner.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

#: what starts a reply line (the probe scripts write it)
MARK = "ropekit-reply "


@dataclass
class Reply:
    """A probe's answer: ``data`` (its JSON reply), or ``error`` (the last line of what it wrote before it died or
    the error it caught), never both."""

    data: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class _Worker:
    process: subprocess.Popen[str]
    stderr: IO[str]


_WORKERS: dict[tuple[str, str], _Worker] = {}


def ask(python: Path, script: Path, request: dict[str, Any]) -> Reply:
    """``script``'s reply to ``request``, from the process of ``python`` running it (started on first use, and
    again after it dies)."""
    key = (str(python), str(script))
    worker = _WORKERS.get(key)
    if worker is None or worker.process.poll() is not None:
        worker = _WORKERS[key] = _start(python, script)
    stdin, stdout = cast("IO[str]", worker.process.stdin), cast("IO[str]", worker.process.stdout)
    try:
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        for line in stdout:
            if line.startswith(MARK):
                data = json.loads(line[len(MARK) :])
                return Reply(error=data["error"]) if "error" in data else Reply(data=data)
    except (BrokenPipeError, OSError):
        pass
    _stop(_WORKERS.pop(key))
    return Reply(error=_last_line(worker.stderr))


def close() -> None:
    """End every probe process."""
    while _WORKERS:
        _stop(_WORKERS.popitem()[1])


def _start(python: Path, script: Path) -> _Worker:
    stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)
    process = subprocess.Popen(  # -P: not the script's folder on sys.path (its vllm.py would shadow vLLM)
        [str(python), "-P", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        bufsize=1,
    )
    return _Worker(process, stderr)


def _stop(worker: _Worker) -> None:
    if worker.process.poll() is None:
        worker.process.kill()
    worker.process.wait()
    for stream in (worker.process.stdin, worker.process.stdout):
        if stream is not None:
            stream.close()


def _last_line(stderr: IO[str]) -> str:
    stderr.seek(0)
    lines = stderr.read().strip().splitlines()
    stderr.close()
    return lines[-1] if lines else "no output"


atexit.register(close)
