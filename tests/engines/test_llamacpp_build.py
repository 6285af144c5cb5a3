"""The llama.cpp library installed here holds no instruction this machine's kernel does not enable.

The oracle is the library's own machine code: ``objdump -d`` of every shared library llama-cpp-python ships,
searched for AMX instructions (where the kernel does not enable AMX tile data) and AVX-512 registers (where it does
not enable their state). The library is found without importing it, so a crashing build fails this test rather
than the run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ropekit import _cpu_features as cpu

AMX = re.compile(r"\b(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+)\b")
AVX512 = re.compile(r"%zmm\d+|%k[1-7]\b")


def _libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("needs llama-cpp-python (pip install ropekit[llamacpp])")
    if shutil.which("objdump") is None or not cpu.is_x86():
        pytest.skip("needs objdump (binutils) on x86-64")
    found = sorted(p for p in (Path(spec.origin).parent / "lib").glob("lib*.so") if not p.is_symlink())
    if not found:
        pytest.skip("llama-cpp-python ships no shared library here")
    return found


def _build() -> dict:
    """What ``tools/build_llama_cpp.py`` recorded of the installed build (empty for a build made otherwise)."""
    spec = importlib.util.find_spec("llama_cpp")
    path = Path(spec.origin).parent / "ropekit_build.json" if spec and spec.origin else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else {}


def _forbidden() -> list[tuple[str, re.Pattern]]:
    """What the library must not hold: whatever the kernel does not enable, and for a build recorded as portable
    (x86-64-v3), AMX and AVX-512 on every machine."""
    portable = _build().get("isa") == "portable"
    rules = []
    if portable or not cpu.amx_enabled():
        rules.append(("AMX", AMX))
    if portable or not cpu.avx512_enabled():
        rules.append(("AVX-512", AVX512))
    return rules


def test_no_instruction_the_kernel_does_not_enable():
    rules = _forbidden()
    if not rules:
        pytest.skip(f"this machine's kernel enables AMX and AVX-512: nothing to exclude ({cpu.describe()[:60]})")
    for library in _libraries():
        text = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True, check=True
        ).stdout
        for name, pattern in rules:
            hits = pattern.findall(text)
            assert not hits, f"{library.name} holds {len(hits)} {name} instructions ({hits[:3]}): {cpu.describe()[:80]}"


def test_the_disassembly_search_finds_what_it_looks_for(tmp_path):
    """The patterns have teeth: a library compiled with ``tilezero`` and a ZMM add is caught by both."""
    if shutil.which("gcc") is None or shutil.which("objdump") is None or not cpu.is_x86():
        pytest.skip("needs gcc and objdump on x86-64")
    source = tmp_path / "amx.c"
    source.write_text(
        "#include <immintrin.h>\n"
        "void zero(void) { _tile_zero(0); }\n"
        "void add(int *out) { __m512i a = _mm512_set1_epi32(1); _mm512_storeu_si512(out, _mm512_add_epi32(a, a)); }\n"
    )
    library = tmp_path / "libamx.so"
    built = subprocess.run(
        ["gcc", "-O1", "-shared", "-fPIC", "-mamx-tile", "-mavx512f", str(source), "-o", str(library)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if built.returncode != 0:
        pytest.skip(f"gcc cannot build AMX code: {built.stderr[-200:]}")
    text = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    assert AMX.search(text) and AVX512.search(text)
