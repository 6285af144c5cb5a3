"""``tools/build_llama_cpp.py``: the CMake arguments of each instruction set, and a wheel folder per set.

The oracle is ggml's own option list (``ggml/CMakeLists.txt`` of llama.cpp): a portable build turns the native
detection off and names x86-64-v3's five features, AMX and AVX-512 off; a native build on a machine whose kernel
does not enable a feature turns that feature off by gcc's name for it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ropekit import _cpu_features as cpu

_spec = importlib.util.spec_from_file_location(
    "build_llama_cpp", Path(__file__).parents[1] / "tools" / "build_llama_cpp.py"
)
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

V3_FLAGS = "sse4_2 avx avx2 fma f16c bmi2"


@pytest.fixture
def machine(monkeypatch):
    def set_machine(flags: str, xfeatures: int | None) -> None:
        monkeypatch.setattr(cpu, "cpuinfo_flags", lambda: frozenset(flags.split()))
        monkeypatch.setattr(cpu, "kernel_xfeatures", lambda: xfeatures)
        monkeypatch.setattr(cpu, "is_x86", lambda: True)

    return set_machine


def test_portable_is_x86_64_v3_with_native_detection_off(machine):
    machine(V3_FLAGS + " avx512f amx_tile amx_int8", 0x600E7)  # even where AMX and AVX-512 run
    args = build.cmake_args("portable")
    assert "-DGGML_NATIVE=OFF" in args
    for option in ("GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2", "GGML_SSE42"):
        assert f"-D{option}=ON" in args
    for option in ("GGML_AVX512", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"):
        assert f"-D{option}=OFF" in args


def test_portable_drops_to_what_an_older_machine_runs(machine):
    machine("sse4_2 avx", None)  # no AVX2: none of x86-64-v3
    args = build.cmake_args("portable")
    assert "-DGGML_AVX2=OFF" in args and "-DGGML_SSE42=ON" in args


def test_native_turns_off_what_the_kernel_does_not_enable(machine):
    machine(V3_FLAGS + " avx512f amx_tile amx_int8", 0x000E7)  # AMX listed, tile data not enabled
    args = build.cmake_args("native")
    assert "-DGGML_NATIVE=ON" in args
    flags = next(a for a in args if a.startswith("-DCMAKE_C_FLAGS="))
    assert "-mno-amx-tile" in flags and "-mno-amx-int8" in flags and "-mno-avx512f" not in flags
    machine(V3_FLAGS + " avx512f amx_tile amx_int8", 0x600E7)  # AMX enabled: still off (ggml's AMX path crashed)
    flags = next(a for a in build.cmake_args("native") if a.startswith("-DCMAKE_C_FLAGS="))
    assert "-mno-amx-tile" in flags and "-mno-avx512f" not in flags


def test_a_wheel_is_kept_per_instruction_set(machine, monkeypatch, tmp_path):
    monkeypatch.setenv("ROPEKIT_CACHE_DIR", str(tmp_path))
    machine(V3_FLAGS + " avx512f amx_tile", 0x600E7)
    portable = build.wheel_dir("0.3.36", "portable", build.cmake_args("portable"))
    native = build.wheel_dir("0.3.36", "native", build.cmake_args("native"))
    machine(V3_FLAGS + " avx512f amx_tile", 0x000E7)  # the same CPUID list on a kernel without AMX
    assert build.wheel_dir("0.3.36", "native", build.cmake_args("native")) != native
    assert build.wheel_dir("0.3.36", "portable", build.cmake_args("portable")) == portable  # runs on both
    assert portable.parent == tmp_path / "wheels" and portable != native
