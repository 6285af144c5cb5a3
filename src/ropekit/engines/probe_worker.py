"""One long-lived process per probe script in the vLLM environment, asked one request at a time, each within a
deadline.

Starting the vLLM environment's interpreter and importing vLLM costs about 10 CPU-seconds; a comparison asks each
engine once per extension, so a conformance run (architectures × methods) would spend most of its time there. A
probe script (:mod:`ropekit.engines._vllm_probe`, :mod:`ropekit.engines._sglang_probe`) reads one JSON request a
line and writes each reply as one line starting with :data:`MARK` (anything else the engine prints is skipped), so
one process answers every request of a run. Its stderr goes to a file, read only when the process dies.

A reader thread moves the process's stdout into a queue, so a request waits for its reply at most ``timeout``
seconds (:data:`TIMEOUT_S`, or ``ROPEKIT_PROBE_TIMEOUT``): a process that blocks (an engine import that hangs, a
model class that loops) is killed and the request answered "no reply within N s". A process that never answered its
first request is not started again in this run: whatever blocked it would block every later request too. The
processes end with this one (``atexit``); :func:`close` ends them sooner.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

#: what starts a reply line (the probe scripts write it)
MARK = "ropekit-reply "
#: seconds one request may wait for its reply, the process's start and the engine's import included (a cold vLLM
#: import takes 10 to 60 s on 2 loaded cores)
TIMEOUT_S = 300.0


@dataclass
class Reply:
    """A probe's answer: ``data`` (its JSON reply), or ``error`` (the last line of what it wrote before it died, the
    error it caught, or that it gave no reply in time: then ``late``), never both."""

    data: dict[str, Any] | None = None
    error: str | None = None
    late: bool = False
    #: the exception's class name where the probe caught it (``None``: it died, or gave no reply in time)
    error_type: str | None = None


@dataclass
class _Worker:
    process: subprocess.Popen[str]
    stderr: IO[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    answered: bool = False


_WORKERS: dict[tuple[str, str], _Worker] = {}
#: the processes that blocked before their first reply, with the error every later request gets
_BLOCKED: dict[tuple[str, str], str] = {}


def timeout_s() -> float:
    """The per-request deadline: ``ROPEKIT_PROBE_TIMEOUT`` (seconds, > 0) where set, else :data:`TIMEOUT_S`."""
    given = os.environ.get("ROPEKIT_PROBE_TIMEOUT")
    try:
        value = float(given) if given else TIMEOUT_S
    except ValueError:
        value = TIMEOUT_S
    return value if value > 0 else TIMEOUT_S


def ask(python: Path | str, script: Path, request: dict[str, Any], *, timeout: float | None = None) -> Reply:
    """``script``'s reply to ``request``, from the process of ``python`` running it (started on first use, and
    again after it dies), within ``timeout`` seconds (default :func:`timeout_s`)."""
    key = (str(python), str(script))
    if key in _BLOCKED:
        return Reply(error=_BLOCKED[key], late=True)
    limit = timeout_s() if timeout is None else timeout
    worker = _WORKERS.get(key)
    if worker is None or worker.process.poll() is not None:
        worker = _WORKERS[key] = _start(python, script)
    stdin = cast("IO[str]", worker.process.stdin)
    try:
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        line = _reply_line(worker, limit)
    except (BrokenPipeError, OSError):
        line = None
    if isinstance(line, str):
        worker.answered = True
        data = json.loads(line[len(MARK) :])
        if "error" in data:
            return Reply(error=data["error"], error_type=data.get("error_type"))
        return Reply(data=data)
    _stop(_WORKERS.pop(key))
    if line is _LATE:
        late = f"no reply within {limit:g} s (the probe process was stopped)"
        if not worker.answered:
            _BLOCKED[key] = late
        return Reply(error=late, late=True)
    return Reply(error=_last_line(worker.stderr))


_LATE = object()


def _reply_line(worker: _Worker, limit: float) -> str | object | None:
    """The next reply line, ``None`` where the process closed its stdout (it died), :data:`_LATE` past the
    deadline."""
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return _LATE
        try:
            line = worker.lines.get(timeout=left)
        except queue.Empty:
            return _LATE
        if line is None or line.startswith(MARK):
            return line


def close() -> None:
    """End every probe process (and forget which ones blocked: a new run tries them again)."""
    while _WORKERS:
        _stop(_WORKERS.popitem()[1])
    _BLOCKED.clear()


def _start(python: Path | str, script: Path) -> _Worker:
    stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)
    process = subprocess.Popen(  # -P: not the script's folder on sys.path (its vllm.py would shadow vLLM)
        [str(python), "-P", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        bufsize=1,
        start_new_session=True,  # its own process group, so a stop also ends what the engine started
    )
    worker = _Worker(process, stderr)
    threading.Thread(target=_pump, args=(process.stdout, worker.lines), daemon=True).start()
    return worker


def _pump(stdout: IO[str], lines: queue.Queue[str | None]) -> None:
    """Moves the process's stdout into ``lines``, line by line; ``None`` once it is closed."""
    try:
        for line in stdout:
            lines.put(line)
    except (OSError, ValueError):  # the stream was closed under the reader (the process was stopped)
        pass
    lines.put(None)


def _stop(worker: _Worker) -> None:
    """Kills the process and its group (an engine's helper processes would keep the pipe open). Its stdout is left
    to the reader thread, which ends at the end of the stream: closing it under a blocked read could block here."""
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait()
    if worker.process.stdin is not None:
        with contextlib.suppress(OSError):  # a pipe the dead process left with unread input
            worker.process.stdin.close()


def _last_line(stderr: IO[str]) -> str:
    stderr.seek(0)
    lines = stderr.read().strip().splitlines()
    stderr.close()
    return lines[-1] if lines else "no output"


atexit.register(close)
