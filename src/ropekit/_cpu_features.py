"""What instruction sets this machine can actually run: CPUID's list, less what the kernel does not enable.

``/proc/cpuinfo`` lists what CPUID reports. A kernel may still refuse a feature's register state: a kernel older
than Linux 5.16 (or a hypervisor's mask) lists ``amx_tile`` yet never enables AMX tile data, so the first
``tilezero`` traps with SIGILL. The truth is the set of extended states the kernel supports,
``arch_prctl(ARCH_GET_XCOMP_SUPP)``: bit 17/18 (AMX tile config/data), bits 5–7 (AVX-512 opmask and ZMM state).
A kernel too old to answer that call enables no AMX at all.

Used by every native build ropekit makes or asks for: the C++ kernel (``ropekit.kernels._cpu``) and the
llama.cpp library that ``make setup`` builds (``tools/build_llama_cpp.py``), so that neither contains an
instruction this machine cannot run, and so that their caches are keyed by the instruction set they were built for.
"""

from __future__ import annotations

import ctypes
import functools
import platform

#: ``arch_prctl`` codes (``arch/x86/include/uapi/asm/prctl.h``) and the syscall number on x86-64
_ARCH_GET_XCOMP_SUPP = 0x1021
_SYS_ARCH_PRCTL = 158
_XFEATURE_AVX512 = (5, 6, 7)  # opmask, ZMM_Hi256, Hi16_ZMM
_XFEATURE_AMX = (17, 18)  # XTILE_CFG, XTILE_DATA

#: gcc's names (``-m<name>`` / ``-mno-<name>``) for the features a kernel may list but not enable; turning off
#: ``amx-tile`` or ``avx512f`` turns off every extension built on it, and these names are known to gcc 11+ and clang 12+
AMX_FLAGS = ("amx-tile", "amx-int8", "amx-bf16")
AVX512_FLAGS = ("avx512f",)


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")


@functools.cache
def cpuinfo_flags() -> frozenset[str]:
    """The feature names ``/proc/cpuinfo`` lists for the first processor (empty where there is no such file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.cache
def kernel_xfeatures() -> int | None:
    """The extended-state bitmask the kernel supports (``ARCH_GET_XCOMP_SUPP``), or ``None`` where the call is
    unavailable (not Linux on x86-64, or a kernel older than 5.16)."""
    if not (is_x86() and platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mask = ctypes.c_uint64(0)
        if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_GET_XCOMP_SUPP, ctypes.byref(mask)) != 0:
            return None
        return int(mask.value)
    except (OSError, AttributeError):
        return None


def amx_enabled() -> bool:
    """True only where CPUID lists AMX *and* the kernel supports its tile state."""
    mask = kernel_xfeatures()
    listed = "amx_tile" in cpuinfo_flags()
    return listed and mask is not None and all(mask >> bit & 1 for bit in _XFEATURE_AMX)


def avx512_enabled() -> bool:
    """True where CPUID lists AVX-512F and the kernel supports its register state (trusted from ``/proc/cpuinfo``
    where the kernel is too old to say: such kernels list AVX-512 only when they enable it)."""
    if "avx512f" not in cpuinfo_flags():
        return False
    mask = kernel_xfeatures()
    return mask is None or all(mask >> bit & 1 for bit in _XFEATURE_AVX512)


def disabled_gcc_features() -> list[str]:
    """gcc feature names that ``-march=native`` may turn on but this machine cannot run (add ``-mno-`` to each)."""
    if not is_x86():
        return []
    off = [] if amx_enabled() else list(AMX_FLAGS)
    if not avx512_enabled():
        off += list(AVX512_FLAGS)
    return off


def native_flags() -> list[str]:
    """``-march=native`` (``-mcpu=native`` off x86) less every feature the kernel does not enable."""
    if not is_x86():
        return ["-mcpu=native"]
    return ["-march=native", *(f"-mno-{name}" for name in disabled_gcc_features())]


def describe() -> str:
    """One line naming the instruction set builds target here, for cache keys and messages."""
    flags = cpuinfo_flags()
    mask = kernel_xfeatures()
    return (
        f"{platform.machine()} xcomp={'unknown' if mask is None else hex(mask)} "
        f"amx={'on' if amx_enabled() else 'off'} avx512={'on' if avx512_enabled() else 'off'} "
        f"flags={' '.join(sorted(flags))}"
    )
