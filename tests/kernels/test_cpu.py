"""The C++ CPU kernel (ropekit.kernels._cpu) against the eager torch path, its oracle.

The kernel does the same fp32 operations in the same order as the eager path, so every comparison is
``torch.equal`` (bit-identical), across dtypes, both pairings, both sequence axes, partial rotary, shared and
per-batch tables, in place, into a buffer, fresh outputs and the backward. Inputs the kernel declines must
come back ``False`` untouched and still give the eager answer through apply_rope.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from ropekit import _cpu_features
from ropekit.functional import apply_rope, cos_sin
from ropekit.kernels import _cpu
from ropekit.kernels.reference import rope_reference
from ropekit.kernels.reference import rotate as _rotate

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


@pytest.fixture(scope="module")
def kernel():
    fn = _cpu.load(wait=True)
    if fn is None:
        pytest.skip("the C++ CPU kernel cannot build here (no compiler); the eager path is covered elsewhere")
    return fn


def make_inputs(
    *,
    batch: int = 2,
    seq: int = 7,
    heads: int = 3,
    head_dim: int = 32,
    rotary_dim: int | None = None,
    seq_dim: int = 1,
    table_batch: int | None = None,
    dtype: torch.dtype = torch.float32,
    table_dtype: torch.dtype = torch.float32,
    start: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random x in the layout of ``seq_dim`` and cos/sin at random positions (per batch row if table_batch)."""
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    shape = (batch, seq, heads, head_dim) if seq_dim == 1 else (batch, heads, seq, head_dim)
    x = (torch.randn(shape, dtype=torch.float64) * 3).to(dtype)
    pos_shape = (seq,) if table_batch is None else (table_batch, seq)
    positions = torch.randint(start, start + 5000, pos_shape)
    inv = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    cos, sin = cos_sin(positions, inv, dtype=table_dtype)
    return x, cos, sin


def assert_same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-for-bit equality (stricter than torch.equal: tells -0.0 from 0.0 and compares NaNs)."""
    as_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
    assert actual.dtype == expected.dtype
    assert torch.equal(actual.contiguous().view(as_int), expected.contiguous().view(as_int))


def eager(x, cos, sin, *, interleaved=False, seq_dim=1, conjugate=False):
    target = torch.empty_like(x)
    return rope_reference(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, conjugate=conjugate, out=target)


CASES = list(
    itertools.product(
        DTYPES,
        [False, True],  # interleaved
        [1, 2],  # seq_dim
        [None, 16, 2],  # rotary_dim: full, half, one pair
        [None, 1, 2],  # table batch: shared (seq, r/2), (1, seq, r/2), per-batch (batch, seq, r/2)
    )
)


@pytest.mark.parametrize(("dtype", "interleaved", "seq_dim", "rotary_dim", "table_batch"), CASES)
def test_kernel_bit_identical_to_eager(seed, kernel, dtype, interleaved, seq_dim, rotary_dim, table_batch):
    x, cos, sin = make_inputs(dtype=dtype, seq_dim=seq_dim, rotary_dim=rotary_dim, table_batch=table_batch)
    r = 2 * cos.shape[-1]
    if r < x.shape[-1]:
        # pass-through dims must keep their exact bits, NaN payloads and negative zeros included
        x[..., -1], x[..., -2] = float("nan"), -0.0
    for conjugate in (False, True):
        expected = eager(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, conjugate=conjugate)
        out = torch.full_like(x, 7.0)
        assert kernel(x, cos, sin, out, r, interleaved, seq_dim, conjugate) is True
        assert_same_bits(out, expected)
        inplace = x.clone()
        assert kernel(inplace, cos, sin, inplace, r, interleaved, seq_dim, conjugate) is True
        assert_same_bits(inplace, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_matches_complex_multiplication(seed, kernel, dtype, interleaved):
    """Independent oracle: pairs as complex numbers times e^{imθ} in float64 (Meta's freqs_cis form)."""
    x, cos, sin = make_inputs(dtype=dtype, table_batch=2, table_dtype=torch.float64)
    out = torch.empty_like(x)
    assert kernel(x, cos, sin, out, x.shape[-1], interleaved, 1, False)
    xd = x.to(torch.float64)
    if interleaved:
        z = torch.view_as_complex(xd.unflatten(-1, (-1, 2)).contiguous())  # (b, s, h, r/2)
    else:
        z = torch.complex(xd[..., :16], xd[..., 16:])
    rot = z * torch.complex(cos, sin).unsqueeze(2)  # (b, s, 1, r/2) broadcast over heads
    ref = torch.view_as_real(rot).flatten(-2) if interleaved else torch.cat((rot.real, rot.imag), -1)
    tol = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(out.to(torch.float64), ref, rtol=tol, atol=tol * 8)


@pytest.mark.parametrize("table_dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_table_dtypes_are_converted_like_eager(seed, kernel, table_dtype):
    x, cos, sin = make_inputs(table_dtype=table_dtype, table_batch=2)
    out = torch.empty_like(x)
    assert kernel(x, cos, sin, out, 32, False, 1, False)
    assert torch.equal(out, eager(x, cos, sin))


@pytest.mark.parametrize("seq_dim", [1, 2])
def test_gqa_query_and_key_heads_share_tables(seed, kernel, seq_dim):
    q, cos, sin = make_inputs(heads=8, seq_dim=seq_dim, head_dim=64)
    k = make_inputs(heads=2, seq_dim=seq_dim, head_dim=64)[0]
    for t in (q, k):
        assert torch.equal(apply_rope(t, cos, sin, seq_dim=seq_dim), eager(t, cos, sin, seq_dim=seq_dim))


def test_strided_views_use_the_kernel(seed, kernel):
    """q and k as views into one fused qkv projection output: outer strides differ, the last dim is contiguous."""
    qkv = torch.randn(2, 9, 3 * 4 * 32)  # (batch, seq, 3 * heads * head_dim)
    q = qkv[..., : 4 * 32].unflatten(-1, (4, 32))  # (batch, seq, heads, head_dim), not contiguous
    cos, sin = make_inputs(seq=9)[1:]
    assert not q.is_contiguous()
    out = torch.empty(q.shape).transpose(1, 2).contiguous().transpose(1, 2)  # a non-contiguous output too
    assert kernel(q, cos, sin, out, 32, False, 1, False)
    assert torch.equal(out, eager(q, cos, sin))
    expected = eager(q, cos, sin)
    assert kernel(q, cos, sin, q, 32, False, 1, False)  # in place inside the fused buffer
    assert torch.equal(q, expected)


def test_declined_inputs_are_untouched_and_fall_back(seed, kernel):
    x, cos, sin = make_inputs()
    expected = eager(x, cos, sin)
    # last dim not contiguous
    xt = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    out = torch.zeros_like(x)
    assert kernel(xt, cos, sin, out, 32, False, 1, False) is False
    assert torch.count_nonzero(out) == 0
    assert torch.equal(apply_rope(xt, cos, sin), expected)
    # output partly overlapping the input: eager computes the whole result before writing
    buf = torch.cat((x.flatten(), torch.zeros(32)))
    shifted = buf[32:].view(x.shape)
    assert kernel(buf[:-32].view(x.shape), cos, sin, shifted, 32, False, 1, False) is False
    # output with repeated elements
    expanded = torch.zeros(1, 7, 3, 32).expand(2, 7, 3, 32)
    assert kernel(x, cos, sin, expanded, 32, False, 1, False) is False
    # integer input
    assert kernel(x.to(torch.int32), cos, sin, x.to(torch.int32), 32, False, 1, False) is False


@pytest.mark.parametrize("seq_dim", [1, 2])
def test_expanded_input_is_read_correctly(seed, kernel, seq_dim):
    """Stride-0 dims of x (a broadcast key) are fine to read; the output is a fresh buffer."""
    x, cos, sin = make_inputs(batch=1, seq_dim=seq_dim)
    xe = x.expand(4, -1, -1, -1)
    out = torch.empty(xe.shape)
    assert kernel(xe, cos, sin, out, 32, False, seq_dim, False)
    assert torch.equal(out, eager(xe.contiguous(), cos, sin, seq_dim=seq_dim))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("seq_dim", [1, 2])
def test_parallel_chunks_cover_every_row_once(seed, kernel, threads, seq_dim):
    """Past the grain size rows are split between threads; each chunk decodes its starting (b, j, k) itself."""
    x, cos, sin = make_inputs(batch=3, seq=67, heads=5, head_dim=128, rotary_dim=96, seq_dim=seq_dim, table_batch=3)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = torch.empty_like(x)
        assert kernel(x, cos, sin, out, 96, True, seq_dim, False)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out, eager(x, cos, sin, interleaved=True, seq_dim=seq_dim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seq_dim", [1, 2])
def test_apply_rope_paths_use_kernel_and_match(seed, kernel, monkeypatch, dtype, seq_dim):
    """apply_rope's in-place, out=, fresh and autograd paths reach the kernel and equal the reference."""
    calls = []

    def counting(*args):
        calls.append(args[-1])  # conjugate
        return kernel(*args)

    kernel_qk = _cpu.load_qk()

    def counting_qk(*args):
        result = kernel_qk(*args)
        if result[0]:
            calls.append(False)  # the one-call entry only rotates forward
        return result

    monkeypatch.setattr(_cpu, "_loaded", counting)
    monkeypatch.setattr(_cpu, "_loaded_qk", counting_qk)
    x, cos, sin = make_inputs(dtype=dtype, seq_dim=seq_dim, rotary_dim=16, table_batch=2)
    ref = rope_reference(x, cos, sin, seq_dim=seq_dim)
    assert torch.equal(apply_rope(x, cos, sin, seq_dim=seq_dim), ref)
    out = torch.empty_like(x)
    assert apply_rope(x, cos, sin, seq_dim=seq_dim, out=out) is out
    assert torch.equal(out, ref)
    y = x.clone()
    assert apply_rope(y, cos, sin, seq_dim=seq_dim, inplace=True) is y
    assert torch.equal(y, ref)
    xg = x.clone().requires_grad_()
    fwd = apply_rope(xg, cos, sin, seq_dim=seq_dim)
    assert torch.equal(fwd.detach(), ref)
    grad = torch.randn_like(x)
    fwd.backward(grad)
    expected_grad = torch.cat((_rotate(grad, cos, -sin, 16, False, seq_dim).to(dtype), grad[..., 16:]), -1)
    assert torch.equal(xg.grad, expected_grad)
    assert calls == [False, False, False, False, True]  # four forwards and the conjugate backward


def test_double_backward_stays_differentiable(seed, kernel):
    # gradgradcheck perturbs every element of x and of its gradient: a short sequence of one head keeps it in seconds
    x, cos, sin = make_inputs(seq=3, heads=1, dtype=torch.float64)
    xg = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(apply_rope(xg, cos, sin).square().sum(), xg, create_graph=True)
    assert g.requires_grad
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, cos, sin, interleaved=True), (xg,))
    assert torch.autograd.gradgradcheck(lambda t: apply_rope(t, cos, sin).square(), (xg,))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache and a forgotten kernel; the real one is reloaded from the user cache afterwards."""
    monkeypatch.setenv("ROPEKIT_CACHE_DIR", str(tmp_path))
    _cpu.reset()
    yield tmp_path
    _cpu.reset()


def test_missing_compiler_falls_back_with_a_warning(seed, fresh_cache, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.warns(RuntimeWarning, match="no C.. compiler"):
        assert _cpu.load() is None
    x, cos, sin = make_inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning is given once, not on every call
        assert torch.equal(apply_rope(x, cos, sin), rope_reference(x, cos, sin))


def test_failed_build_is_remembered(seed, fresh_cache, monkeypatch):
    """A compiler that fails leaves a .failed log; the next process does not retry (until it is deleted)."""
    monkeypatch.setenv("CXX", "false")  # found on PATH, always exits 1
    with pytest.warns(RuntimeWarning, match="exited with 1"):
        assert _cpu.load(wait=True) is None
    assert len(list(fresh_cache.glob("*.failed"))) == 1
    assert not list(fresh_cache.glob("*.so"))
    _cpu.reset()
    with pytest.warns(RuntimeWarning, match="build failed"):
        assert _cpu.load() is None


def test_first_call_does_not_wait_for_the_build(seed, fresh_cache, monkeypatch, capfd):
    """Without wait, load() starts a detached build and returns None at once; a failure shows up on a later call."""
    monkeypatch.setenv("CXX", "false")
    assert _cpu.load() is None  # returns immediately; eager path meanwhile
    assert "in the background" in capfd.readouterr().err
    assert _cpu._background is not None
    assert _cpu._background.wait(timeout=600) == 1  # the builder failed and left a .failed log
    assert len(list(fresh_cache.glob("*.failed"))) == 1
    monkeypatch.setattr(_cpu, "_next_check", 0.0)
    with pytest.warns(RuntimeWarning, match="build failed"):
        assert _cpu.load() is None


@pytest.mark.slow
def test_background_build_from_scratch(fresh_cache, monkeypatch):
    """The full cold path: a detached build into an empty cache, then the library loads and matches eager."""
    assert _cpu.load() is None
    assert _cpu._background is not None
    assert _cpu._background.wait(timeout=1800) == 0
    monkeypatch.setattr(_cpu, "_next_check", 0.0)
    fn = _cpu.load()
    assert fn is not None
    x, cos, sin = make_inputs()
    out = torch.empty_like(x)
    assert fn(x, cos, sin, out, 32, False, 1, False)
    assert torch.equal(out, eager(x, cos, sin))


def test_disabled_by_environment(fresh_cache, monkeypatch):
    monkeypatch.setenv("ROPEKIT_CPU_KERNEL", "0")
    assert _cpu.load(wait=True) is None
    assert not list(fresh_cache.iterdir())


def test_build_key_tracks_source_and_torch(monkeypatch):
    key = _cpu.build_key("/usr/bin/c++")
    assert key == _cpu.build_key("/usr/bin/c++")
    assert key != _cpu.build_key("/usr/bin/clang++")
    monkeypatch.setattr(_cpu, "CPP_SOURCE", _cpu.CPP_SOURCE + "\n// changed")
    assert key != _cpu.build_key("/usr/bin/c++")
    assert "-ffp-contract=off" in _cpu.compile_flags()  # an FMA would break bit-equality with eager


def _machine(monkeypatch, flags: str, xfeatures: int | None) -> None:
    """Pretend to be a machine whose CPUID lists ``flags`` and whose kernel supports ``xfeatures``."""
    monkeypatch.setattr(_cpu_features, "cpuinfo_flags", lambda: frozenset(flags.split()))
    monkeypatch.setattr(_cpu_features, "kernel_xfeatures", lambda: xfeatures)
    monkeypatch.setattr(_cpu_features, "is_x86", lambda: True)


def test_build_key_tracks_what_the_kernel_enables(monkeypatch):
    # One CPUID list (AMX and AVX-512 listed); the kernel either supports AMX tile data (bits 17, 18) or not.
    listed = "avx avx2 fma f16c avx512f avx512bw amx_tile amx_int8 amx_bf16"
    _machine(monkeypatch, listed, 0x600E7)
    with_amx = _cpu.build_key("/usr/bin/c++")
    _machine(monkeypatch, listed, 0x000E7)
    assert _cpu.build_key("/usr/bin/c++") != with_amx


def test_compile_flags_never_name_an_instruction_the_kernel_does_not_enable(monkeypatch):
    _machine(monkeypatch, "avx avx2 avx512f amx_tile amx_int8", 0x000E7)  # AVX-512 state on, AMX tile data off
    flags = _cpu.compile_flags()
    assert "-march=native" in flags and "-mno-amx-tile" in flags and "-mno-amx-int8" in flags
    assert "-mno-avx512f" not in flags
    _machine(monkeypatch, "avx avx2 avx512f", 0x7)  # the kernel supports no AVX-512 state (bits 5-7 clear)
    assert "-mno-avx512f" in _cpu.compile_flags()
    _machine(monkeypatch, "avx avx2 avx512f amx_tile", 0x600E7)  # AMX enabled, but the kernel code never asks for it
    assert "-mno-amx-tile" in _cpu.compile_flags()
