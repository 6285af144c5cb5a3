"""Build llama-cpp-python for an explicit instruction set, cache the wheel under that set's name, and install it.

llama-cpp-python builds llama.cpp from source with ``GGML_NATIVE`` (``-march=native``) by default. That library
holds every instruction CPUID lists, including AMX that a kernel may not enable (SIGILL at the first decode), and
pip caches the wheel by version alone, so a wheel built on one processor is reused on another. Here:

- ``--isa portable`` (the default): ``GGML_NATIVE=OFF`` with x86-64-v3 (AVX, AVX2, FMA, F16C, BMI2) where the
  machine runs it, else SSE 4.2, else nothing: one wheel that runs on every machine of that level.
- ``--isa native``: ``-march=native`` less every feature the kernel does not enable (``ropekit._cpu_features``) and
  less AMX always (ggml's AMX path segfaulted at the first decode of SmolLM2 on a Xeon VM whose kernel does enable
  AMX tile data), the fastest build this machine runs; its wheel is keyed by this machine's feature set.

The wheel is built with pip's cache off and kept in ``$ROPEKIT_CACHE_DIR/wheels/<key>/`` (default
``~/.cache/ropekit/wheels``), ``<key>`` hashing the version, the CMake arguments and the instruction set, so a
wheel is only ever reused where it was built for. ``--extra server`` installs it with llama-cpp-python's
``[server]`` extra. Exit status 0 on success, 1 when the build or install failed (the message says why).

    python tools/build_llama_cpp.py [--isa portable|native] [--version 0.3.36] [--extra server] [--timeout 2700]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from ropekit import _cpu_features as cpu

VERSION = "0.3.36"
#: what the library never needs: llama.cpp's tests, examples and tools, and the multimodal library (imported
#: lazily by llama_cpp, only for image chat formats); leaving them out halves the build
COMMON_ARGS = ("-DLLAVA_BUILD=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
#: ggml's switch for each x86-64-v3 feature, and the /proc/cpuinfo name that says the machine has it
V3 = (("GGML_AVX", "avx"), ("GGML_AVX2", "avx2"), ("GGML_FMA", "fma"), ("GGML_F16C", "f16c"), ("GGML_BMI2", "bmi2"))


def cmake_args(isa: str) -> list[str]:
    """The CMake arguments of a build for ``isa`` (``portable`` or ``native``) on this machine."""
    args = list(COMMON_ARGS)
    if isa == "native":
        args.append("-DGGML_NATIVE=ON")
        off = cpu.disabled_gcc_features()
        off += [name for name in cpu.AMX_FLAGS if name not in off]
        if off:
            flags = " ".join(f"-mno-{name}" for name in off)
            args += [f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"]
        return args
    args.append("-DGGML_NATIVE=OFF")
    if not cpu.is_x86():
        return args
    flags = cpu.cpuinfo_flags()
    v3 = all(name in flags for _, name in V3)
    for option, _ in V3:
        args.append(f"-D{option}={'ON' if v3 else 'OFF'}")
    sse42 = "sse4_2" in flags
    args.append(f"-DGGML_SSE42={'ON' if sse42 else 'OFF'}")
    args += [f"-D{option}=OFF" for option in ("GGML_AVX512", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")]
    return args


def wheel_dir(version: str, isa: str, args: list[str]) -> Path:
    """Where the wheel of this version, ISA and argument list lives (its name is a hash of all three)."""
    machine = cpu.describe() if isa == "native" else f"{sys.platform} {os.uname().machine}"
    key = hashlib.sha256("\0".join([version, isa, *args, machine, sys.version]).encode()).hexdigest()[:16]
    base = Path(os.environ.get("ROPEKIT_CACHE_DIR") or Path.home() / ".cache" / "ropekit")
    return base / "wheels" / f"llama-cpp-python-{version}-{isa}-{key}"


def pip(*args: str, env: dict[str, str] | None = None, timeout: float | None = None) -> int:
    cmd = [sys.executable, "-m", "pip", *args]
    print("build_llama_cpp:", " ".join(cmd), flush=True)
    try:
        return subprocess.run(cmd, env=env, timeout=timeout, check=False).returncode
    except subprocess.TimeoutExpired:
        print(f"build_llama_cpp: pip did not finish within {timeout:.0f} s", file=sys.stderr)
        return 124


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--isa", choices=("portable", "native"), default="portable")
    parser.add_argument("--version", default=VERSION)
    parser.add_argument("--extra", choices=("server",), default=None)
    parser.add_argument("--timeout", type=float, default=2700.0, help="seconds the build may take")
    parser.add_argument("--print-key", action="store_true", help="print the wheel folder and exit")
    opts = parser.parse_args(argv)

    args = cmake_args(opts.isa)
    folder = wheel_dir(opts.version, opts.isa, args)
    if opts.print_key:
        print(folder)
        return 0
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if not wheels:
        env = {**os.environ, "CMAKE_ARGS": shlex.join(args), "FORCE_CMAKE": "1"}  # split by shlex in the build
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        print(f"build_llama_cpp: building llama-cpp-python {opts.version} ({opts.isa}): CMAKE_ARGS={env['CMAKE_ARGS']}")
        tmp = folder.with_name(folder.name + ".partial")
        tmp.mkdir(parents=True, exist_ok=True)
        spec = f"llama-cpp-python=={opts.version}"
        rc = pip("wheel", "--quiet", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python", spec,
                 "-w", str(tmp), env=env, timeout=opts.timeout)  # fmt: skip
        wheels = sorted(tmp.glob("llama_cpp_python-*.whl"))
        if rc != 0 or not wheels:
            print(f"build_llama_cpp: the build failed (pip exited {rc})", file=sys.stderr)
            return 1
        if not folder.exists():
            tmp.replace(folder)
        wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    else:
        print(f"build_llama_cpp: reusing {wheels[-1]} (built for this instruction set)")
    target = str(wheels[-1]) + (f"[{opts.extra}]" if opts.extra else "")
    rc = pip("install", "--quiet", "--force-reinstall", "--no-deps", str(wheels[-1]))
    if rc == 0:
        rc = pip("install", "--quiet", target)
    if rc != 0:
        return 1
    record(opts.isa, args)
    return 0


def record(isa: str, args: list[str]) -> None:
    """Write ``llama_cpp/ropekit_build.json`` beside the installed package: the instruction set it was built for,
    which ``tests/engines/test_llamacpp_build.py`` holds the library's machine code to."""
    import importlib.util

    importlib.invalidate_caches()
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without importing (loading) the library
    if spec is None or spec.origin is None:
        return
    facts = {"isa": isa, "cmake_args": args, "machine": cpu.describe()}
    (Path(spec.origin).parent / "ropekit_build.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
