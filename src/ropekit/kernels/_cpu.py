"""Build, cache and load the C++ CPU kernel (:mod:`ropekit.kernels._cpu_source`).

The kernel is compiled with the system C++ compiler against the installed torch, so ``pip install ropekit``
needs no build step and the binary matches this machine: ``-march=native`` less every feature the kernel does not
enable (AMX always off: the kernel never asks for its tile state; see :mod:`ropekit._cpu_features`). The shared
library is cached in ``$ROPEKIT_CACHE_DIR`` (default ``~/.cache/ropekit/kernels``) under a hash of the source,
flags, compiler, torch and Python versions and the instruction set the kernel enables, so the compile (~20 s of CPU time; 25–70 s of wall time on a loaded
2-core machine) happens once per machine.

The first call never stalls: it starts the compile in a detached background process, says so once on stderr,
and apply_rope uses the eager torch path (bit-identical results, only slower) until the library appears; the
build outlives a short script, so the next run has it. ``load(wait=True)`` (or ``ROPEKIT_CPU_KERNEL=wait``)
compiles in the foreground instead, as the benchmark and the tests do. A file lock makes concurrent builds
of one key happen once. With no compiler, or a failed build, callers get ``None`` and a warning once; a
failed build leaves a ``.failed`` log in the cache so later processes do not retry (delete it to retry).

Environment:
    ROPEKIT_CPU_KERNEL     ``0``: never build or load the kernel; ``wait``: compile in the foreground.
    ROPEKIT_CACHE_DIR      where builds are cached.
    CXX                    the compiler (default: the first of c++, g++, clang++ on PATH).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from ropekit import _cpu_features
from ropekit.kernels._cpu_source import CPP_SOURCE

MODULE_NAME = "_ropekit_cpu"
_UNSET = object()
_loaded: object = _UNSET  # the rope_into function, or None once loading failed or is disabled
_loaded_qk: object = None  # the rope_qk function (validate + rotate q and k in one call), once loaded
_background: subprocess.Popen | None = None  # the build this process started, if any
_next_check = 0.0  # monotonic time of the next look for a background build's result
_POLL_S = 0.5


def cache_dir() -> Path:
    """Directory holding compiled kernels (``$ROPEKIT_CACHE_DIR`` or ``$XDG_CACHE_HOME/ropekit/kernels``)."""
    if os.environ.get("ROPEKIT_CACHE_DIR"):
        return Path(os.environ["ROPEKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ropekit" / "kernels"


def find_compiler() -> str | None:
    """Path of the C++ compiler to use: ``$CXX`` if set (even if missing), else c++, g++ or clang++."""
    if os.environ.get("CXX"):
        return shutil.which(os.environ["CXX"])
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    return None


def compile_flags() -> list[str]:
    """Compiler flags; they keep the math bit-identical to the separate eager torch ops.

    ``-ffp-contract=off`` forbids fusing a multiply and an add into one FMA (one rounding instead of two).
    GCC 12's straight-line (SLP) vectorizer still turns the interleaved ``(a − b, d + e)`` lane pattern into
    ``vfmaddsub`` despite it (seen with fp64 rows of one or two pairs), so it is switched off; the loop
    vectorizer, which does the real work, is unaffected.
    """
    arch = _cpu_features.native_flags()
    if _cpu_features.is_x86():
        arch += [f"-mno-{name}" for name in _cpu_features.AMX_FLAGS if f"-mno-{name}" not in arch]
    flags = ["-O3", *arch, "-ffp-contract=off", "-fno-tree-slp-vectorize", "-fPIC", "-shared", "-std=c++20"]
    flags += ["-fvisibility=hidden", "-w"]
    flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    if sys.platform.startswith("linux"):
        # at::parallel_for is inline OpenMP code in torch's headers; the loader then binds libgomp.so.1 to the
        # copy torch already loaded, so there is one thread pool.
        flags.append("-fopenmp")
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    return flags


def build_key(compiler: str) -> str:
    """Hash naming one build: source, flags, compiler, torch, Python and CPU."""
    parts = [
        CPP_SOURCE,
        " ".join(compile_flags()),
        compiler,
        torch.__version__,
        sys.implementation.cache_tag or "",
        sys.version,
        _cpu_features.describe(),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _compile(compiler: str, source: Path, target: Path, log: Path) -> None:
    from torch.utils import cpp_extension

    python_include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(python_include, "Python.h")):
        raise RuntimeError(f"Python development headers are missing ({python_include}/Python.h)")
    includes = [*cpp_extension.include_paths(), python_include]
    torch_lib = cpp_extension.library_paths()[0]
    cmd = [compiler, *compile_flags()]
    for inc in includes:
        cmd += ["-isystem", inc]
    cmd += [str(source), "-o", str(target), f"-L{torch_lib}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    cmd.append(f"-Wl,-rpath,{torch_lib}")
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.write_text(" ".join(cmd) + "\n\n" + result.stdout + result.stderr, encoding="utf-8")
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{Path(compiler).name} exited with {result.returncode}: {tail}")


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
    assert spec is not None  # an ExtensionFileLoader spec always exists for a path
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _paths(compiler: str) -> tuple[Path, Path, Path]:
    """(library, failure log, lock file) for this build key."""
    stem = cache_dir() / f"{MODULE_NAME}_{build_key(compiler)}"
    return stem.with_suffix(".so"), stem.with_suffix(".failed"), stem.with_suffix(".lock")


def _require_compiler() -> str:
    compiler = find_compiler()
    if compiler is None:
        wanted = os.environ.get("CXX") or "c++, g++ or clang++"
        raise RuntimeError(f"no C++ compiler found on PATH (looked for {wanted})")
    return compiler


def build(*, verbose: bool = True) -> Path:
    """Compile the kernel into the cache if it is not there yet (waiting for a build already running).

    Returns:
        Path of the shared library.

    Raises:
        RuntimeError: no compiler, missing headers, a compile error, or an earlier failed build of this key.
    """
    compiler = _require_compiler()
    target, failed, lock_path = _paths(compiler)
    if target.exists():
        return target
    if failed.exists():
        raise RuntimeError(f"an earlier build failed (log: {failed}; delete it to retry)")
    target.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be compiling the same key: wait for it
        if target.exists():
            return target
        if failed.exists():
            raise RuntimeError(f"the build failed (log: {failed}; delete it to retry)")
        source = target.with_suffix(".cpp")
        source.write_text(CPP_SOURCE, encoding="utf-8")
        partial = target.with_suffix(f".{os.getpid()}.tmp.so")
        if verbose:
            print(
                f"ropekit: compiling the C++ CPU kernel for apply_rope (once per machine, ~20 s of CPU); "
                f"cache: {target.parent}",
                file=sys.stderr,
                flush=True,
            )
        start = time.perf_counter()
        log = target.with_suffix(".log")
        try:
            _compile(compiler, source, partial, log)
        except Exception as exc:
            partial.unlink(missing_ok=True)
            failed.write_text(f"{exc}\n\n{log.read_text(encoding='utf-8') if log.exists() else ''}", encoding="utf-8")
            raise
        os.replace(partial, target)  # atomic: readers never see a half-written library
        if verbose:
            print(f"ropekit: CPU kernel ready in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return target


def _start_background_build(target: Path) -> None:
    global _background
    print(
        "ropekit: building the C++ CPU kernel in the background (once per machine, ~20 s of CPU; cache: "
        f"{target.parent}); apply_rope uses the eager torch path until it is ready",
        file=sys.stderr,
        flush=True,
    )
    code = "from ropekit.kernels._cpu import build; build(verbose=False)"
    _background = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # keeps compiling if this process exits first; the next run finds the library
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )


def _unavailable(exc: Exception) -> None:
    global _loaded
    warnings.warn(
        f"ropekit: the C++ CPU kernel is unavailable ({exc}); apply_rope uses the slower eager torch path",
        RuntimeWarning,
        stacklevel=4,
    )
    _loaded = None


def load(*, wait: bool = False) -> Callable[..., bool] | None:
    """The compiled ``rope_into``, or None while it builds in the background, if disabled, or if it cannot build.

    Args:
        wait: compile in the foreground (with a message) instead of returning None while a build runs.
    """
    global _loaded, _loaded_qk, _next_check
    if _loaded is not _UNSET:
        return _loaded  # type: ignore[return-value]
    mode = os.environ.get("ROPEKIT_CPU_KERNEL", "auto")
    if mode == "0" or os.name != "posix":
        _loaded = None
        return None
    wait = wait or mode == "wait"
    now = time.monotonic()
    if not wait and now < _next_check:
        return None  # a background build is running; look again shortly, not on every call
    _next_check = now + _POLL_S
    try:
        compiler = _require_compiler()
        target, failed, _ = _paths(compiler)
        if not target.exists():
            if wait:
                build()
            elif failed.exists():
                raise RuntimeError(f"the build failed (log: {failed}; delete it to retry)")
            else:
                if _background is None:
                    _start_background_build(target)
                elif _background.poll() not in (None, 0):
                    raise RuntimeError(f"the background build exited with {_background.returncode}")
                return None
        module = _import(target)
        _loaded, _loaded_qk = module.rope_into, module.rope_qk
    except Exception as exc:  # any failure degrades to the eager path, never breaks apply_rope
        _unavailable(exc)
    return _loaded  # type: ignore[return-value]


def load_qk() -> Callable[..., tuple] | None:
    """The compiled ``rope_qk`` (validate and rotate q and k in one call), or None when :func:`load` gives None."""
    if _loaded is _UNSET or _loaded is None:
        load()
    return _loaded_qk  # type: ignore[return-value]


def reset() -> None:
    """Forget the loaded kernel and any background build, so the next :func:`load` starts over (for tests)."""
    global _loaded, _loaded_qk, _background, _next_check
    _loaded, _loaded_qk, _background, _next_check = _UNSET, None, None, 0.0
