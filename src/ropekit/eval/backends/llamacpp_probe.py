"""Does llama.cpp run here? Load a GGUF file and decode in a child process before anything loads it in ours.

A llama.cpp library built for another processor (``-march=native`` on a machine whose CPUID lists AMX that the
kernel does not enable, or a wheel copied from another machine) dies with SIGILL at the first decode, and takes the
whole process with it: a test run, a user's evaluation. So every in-process load of llama.cpp goes through
:func:`require_llama_cpp`, which runs the load, a short prefill and a decode in a child, remembers the answer for
the file, and raises a one-line :class:`LlamaCppUnavailable` naming the cause when the child fails. The child's
crash stays in the child. The rebuild that fixes the SIGILL case is ``python tools/build_llama_cpp.py`` (an explicit instruction set).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

#: seconds the child may take to load the file, prefill and decode (a 135M model: under 1 s)
TIMEOUT_S = 120.0

#: what the child runs: load the file with a small context, prefill a batch of 64 tokens (the batched matrix
#: products, where ggml's AMX and repacked kernels run: one token alone passed on a build that then crashed on
#: three), decode one more, print the vocabulary size
_CHILD = """
import sys
import llama_cpp
llm = llama_cpp.Llama(sys.argv[1], n_ctx=80, n_batch=64, n_threads=1, verbose=False)
n = llm.n_vocab()
llm.eval([(7 * i + 1) % n for i in range(64)])
llm.eval([3 % n])
print(n)
"""

REBUILD = "rebuild it for this machine: python tools/build_llama_cpp.py (ropekit's repository), or pip install with CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON'"


class LlamaCppUnavailable(ValueError):
    """llama.cpp cannot run here (not installed, or its library crashes on this machine); the message is one line."""


def installed_version() -> str | None:
    """llama-cpp-python's version from its metadata, without importing (loading) the library."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def probe(path: str | Path, *, timeout: float = TIMEOUT_S) -> str | None:
    """``None`` where llama.cpp loads ``path``, prefills 64 tokens and decodes one in a child process; else one
    line naming why not. Remembered for the life of this process per file: its path, size, modification time and
    the hash of its header (:func:`header_digest`), so a file replaced in place with the same size and time (``cp
    -p``, ``rsync -a``, ``tar`` keep both) is probed again."""
    path = Path(path).resolve()
    stat = path.stat()
    return _probe(str(path), stat.st_size, stat.st_mtime_ns, header_digest(path), float(timeout))


def header_digest(path: Path) -> str:
    """The SHA-256 of the file's header (metadata and tensor table, up to where tensor data begins), read once its
    every size is checked against the file (:func:`~ropekit.integrations.gguf.file.check_gguf`); a file that is not
    a whole GGUF file gets the digest of its first mebibyte, and llama.cpp's own refusal in the probe."""
    import hashlib

    from ropekit.integrations.gguf.file import check_gguf

    try:
        end = check_gguf(path).data_start
    except ValueError:
        end = 1 << 20
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while end > 0 and (block := handle.read(min(end, 1 << 20))):
            digest.update(block)
            end -= len(block)
    return digest.hexdigest()


@functools.cache
def _probe(path: str, _size: int, _mtime: int, _header: str, timeout: float) -> str | None:
    name = Path(path).name
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, path],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "PYTHONFAULTHANDLER": ""},
        )
    except subprocess.TimeoutExpired:
        return f"llama.cpp did not load {name}, prefill and decode within {timeout:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode)
        if sig is signal.SIGILL:
            return (
                f"llama.cpp crashed with SIGILL (an illegal instruction) running {name}: its library was built for "
                f"instructions this machine does not run; {REBUILD}"
            )
        return f"llama.cpp crashed with {sig.name} loading {name}"
    lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit status {done.returncode}"
    return f"llama.cpp could not load {name}, prefill and decode: {last}"


def require_llama_cpp(path: str | Path):
    """The ``llama_cpp`` module, once a child process has shown that it runs ``path`` here.

    Raises:
        LlamaCppUnavailable: llama-cpp-python is not installed, or the child failed (the reason, one line).
    """
    if installed_version() is None:
        raise LlamaCppUnavailable("the llamacpp engine needs llama-cpp-python: pip install 'ropekit[llamacpp]'")
    why = probe(path)
    if why is not None:
        raise LlamaCppUnavailable(why)
    import llama_cpp

    return llama_cpp
