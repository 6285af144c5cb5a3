"""``ropekit._cpu_features``: the instruction set this machine runs, against programs that execute the instructions.

The oracle is the processor itself: a small C program runs one AMX (``tilezero``) or AVX-512 (``vpaddd zmm``)
instruction in a child process; it exits 0 where the kernel enables that state and dies with SIGILL where it does
not. ``amx_enabled`` and ``avx512_enabled`` must agree with it on whatever machine runs the suite.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ropekit import _cpu_features as cpu

AMX_PROGRAM = r"""
#include <sys/syscall.h>
#include <unistd.h>
#include <immintrin.h>
/* palette 1; tile 0: 64 bytes a row, 16 rows (static data: gcc drops stores it cannot see ldtilecfg read) */
static const unsigned char cfg[64] = {1, [16] = 64, [48] = 16};
int main(void) {
    syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
    _tile_loadconfig(cfg);
    _tile_zero(0);
    _tile_release();
    return 0;
}
"""

AVX512_PROGRAM = r"""
#include <immintrin.h>
int main(void) {
    volatile int out[16];
    __m512i a = _mm512_set1_epi32(1);
    _mm512_storeu_si512((void *)out, _mm512_add_epi32(a, a));
    return out[3] == 2 ? 0 : 1;
}
"""


def _runs(tmp_path, source: str, flags: list[str]) -> bool:
    """Compile ``source`` with ``flags`` and report whether it runs to a clean exit here."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None or not cpu.is_x86():
        pytest.skip("needs a C compiler on x86-64")
    src, exe = tmp_path / "probe.c", tmp_path / "probe"
    src.write_text(source)
    built = subprocess.run([compiler, "-O1", *flags, str(src), "-o", str(exe)], capture_output=True, check=False)
    if built.returncode != 0:
        pytest.skip(f"the compiler cannot build the probe: {built.stderr.decode()[-200:]}")
    return subprocess.run([str(exe)], capture_output=True, check=False).returncode == 0


def test_amx_enabled_agrees_with_a_tilezero(tmp_path):
    if "amx_tile" not in cpu.cpuinfo_flags():
        assert not cpu.amx_enabled()
        return
    assert cpu.amx_enabled() == _runs(tmp_path, AMX_PROGRAM, ["-mamx-tile"])


def test_avx512_enabled_agrees_with_a_zmm_add(tmp_path):
    if "avx512f" not in cpu.cpuinfo_flags():
        assert not cpu.avx512_enabled()
        return
    assert cpu.avx512_enabled() == _runs(tmp_path, AVX512_PROGRAM, ["-mavx512f"])


@pytest.mark.parametrize(
    ("xfeatures", "amx", "avx512"),
    [
        (0x600E7, True, True),  # Sapphire Rapids with a kernel that supports tile data
        (0x000E7, False, True),  # the same CPUID list, a kernel without tile state (bits 17, 18 clear)
        (0x00007, False, False),  # a kernel with no AVX-512 state (bits 5-7 clear)
        (None, False, True),  # a kernel too old to answer ARCH_GET_XCOMP_SUPP enables no AMX
    ],
)
def test_enabled_features_follow_the_kernels_mask(monkeypatch, xfeatures, amx, avx512):
    monkeypatch.setattr(cpu, "cpuinfo_flags", lambda: frozenset({"avx2", "avx512f", "amx_tile", "amx_int8"}))
    monkeypatch.setattr(cpu, "kernel_xfeatures", lambda: xfeatures)
    monkeypatch.setattr(cpu, "is_x86", lambda: True)
    assert cpu.amx_enabled() is amx
    assert cpu.avx512_enabled() is avx512
    off = cpu.disabled_gcc_features()
    assert ("amx-tile" in off) is not amx
    assert ("avx512f" in off) is not avx512
