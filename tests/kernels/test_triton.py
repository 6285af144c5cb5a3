"""The Triton kernel (ropekit.kernels._triton) against the eager torch path, its oracle.

On a CUDA machine (``gpu`` marker) the kernel runs for real, through apply_rope's automatic dispatch. Without
one, the same checks run through Triton's CPU interpreter (``TRITON_INTERPRET=1``) when triton is installed,
and skip cleanly when it is not. On GPU the compiler may fuse a multiply-add, so results agree within one fp32
rounding (then one rounding to the storage dtype); the interpreter does the separate numpy operations.
"""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest
import torch

import ropekit.kernels
from ropekit.functional import apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels.reference import rope_reference

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
TOL = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 2e-6, "atol": 2e-6},
    torch.bfloat16: {"rtol": 8e-3, "atol": 8e-3},  # one bf16 ulp: a fused multiply-add may round across a tie
    torch.float16: {"rtol": 1e-3, "atol": 1e-3},
}


@pytest.fixture(scope="module")
def interpreted():
    """_triton.py loaded as a fresh module with TRITON_INTERPRET=1, so its kernels run on CPU tensors."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install triton to run the kernel through its interpreter)")
    patch = pytest.MonkeyPatch()
    patch.setenv("TRITON_INTERPRET", "1")  # read when @triton.jit runs, i.e. while the module executes
    try:
        path = Path(ropekit.kernels.__file__).with_name("_triton.py")
        spec = importlib.util.spec_from_file_location("ropekit_triton_interpreted", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        patch.undo()


def make_inputs(*, device, dtype, seq_dim, rotary_dim, table_batch, batch=2, seq=7, heads=3, head_dim=32):
    shape = (batch, seq, heads, head_dim) if seq_dim == 1 else (batch, heads, seq, head_dim)
    x = (torch.randn(shape, dtype=torch.float64) * 3).to(dtype=dtype, device=device)
    positions = torch.randint(0, 8000, (seq,) if table_batch is None else (table_batch, seq), device=device)
    inv = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    cos, sin = cos_sin(positions, inv)
    return x, cos, sin


def eager(x, cos, sin, *, interleaved, seq_dim, conjugate=False):
    out = torch.empty_like(x)
    return rope_reference(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, conjugate=conjugate, out=out)


CASES = list(
    itertools.product(
        [torch.float32, torch.bfloat16],
        [False, True],  # interleaved
        [1, 2],  # seq_dim
        [32, 16],  # rotary_dim: full, half
        [None, 2],  # shared table, per-batch positions
    )
)


@pytest.mark.parametrize(("dtype", "interleaved", "seq_dim", "rotary_dim", "table_batch"), CASES)
def test_interpreted_kernel_matches_eager(seed, interpreted, dtype, interleaved, seq_dim, rotary_dim, table_batch):
    x, cos, sin = make_inputs(
        device="cpu", dtype=dtype, seq_dim=seq_dim, rotary_dim=rotary_dim, table_batch=table_batch
    )
    for conjugate in (False, True):
        expected = eager(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim, conjugate=conjugate)
        out = torch.full_like(x, 7.0)
        assert interpreted.rope_into(x, cos, sin, out, rotary_dim, interleaved, seq_dim, conjugate)
        torch.testing.assert_close(out, expected, **TOL[dtype])
        assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])  # pass-through dims copied exactly
        inplace = x.clone()
        assert interpreted.rope_into(inplace, cos, sin, inplace, rotary_dim, interleaved, seq_dim, conjugate)
        torch.testing.assert_close(inplace, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_interpreted_other_dtypes(seed, interpreted, dtype):
    x, cos, sin = make_inputs(device="cpu", dtype=dtype, seq_dim=1, rotary_dim=32, table_batch=2)
    out = torch.empty_like(x)
    assert interpreted.rope_into(x, cos, sin, out, 32, False, 1, False)
    torch.testing.assert_close(out, eager(x, cos, sin, interleaved=False, seq_dim=1), **TOL[dtype])


def test_interpreted_gqa_and_strided_views(seed, interpreted):
    qkv = torch.randn(2, 7, (8 + 2 + 2) * 32)  # fused projection output: q (8 heads), k and v (2 heads each)
    q = qkv[..., : 8 * 32].unflatten(-1, (8, 32))  # (batch, seq, 8, head_dim), not contiguous
    k = qkv[..., 8 * 32 : 10 * 32].unflatten(-1, (2, 32))  # (batch, seq, 2, head_dim)
    _, cos, sin = make_inputs(device="cpu", dtype=torch.float32, seq_dim=1, rotary_dim=32, table_batch=None)
    for t in (q, k):
        expected = eager(t, cos, sin, interleaved=False, seq_dim=1)
        assert interpreted.rope_into(t, cos, sin, t, 32, False, 1, False)
        torch.testing.assert_close(t, expected, **TOL[torch.float32])


def test_interpreted_declines_what_eager_must_do(seed, interpreted):
    x, cos, sin = make_inputs(device="cpu", dtype=torch.float32, seq_dim=1, rotary_dim=32, table_batch=None)
    xt = x.transpose(-1, -2).contiguous().transpose(-1, -2)  # last dim strided
    assert interpreted.rope_into(xt, cos, sin, torch.empty_like(x), 32, False, 1, False) is False
    buf = torch.cat((x.flatten(), torch.zeros(32)))
    assert (
        interpreted.rope_into(buf[:-32].view(x.shape), cos, sin, buf[32:].view(x.shape), 32, False, 1, False) is False
    )
    assert (
        interpreted.rope_into(x, cos, sin, torch.zeros(1, 7, 3, 32).expand(2, 7, 3, 32), 32, False, 1, False) is False
    )


# ------------------------------------------------------------------ q and k in one launch (apply_rope_qk's contract)

QK_CASES = list(
    itertools.product(
        [torch.float32, torch.bfloat16],
        [False, True],  # interleaved
        [1, 2],  # seq_dim
        [32, 16],  # rotary_dim: full, partial
        [False, True],  # in place
    )
)


def qk_inputs(*, device, dtype, seq_dim, rotary_dim, table_batch=None, batch=2, seq=5):
    """q with 4 heads of head_dim 32, k with 2 heads (GQA) of head_dim 40, one set of tables."""

    def make(heads, head_dim):
        shape = (batch, seq, heads, head_dim) if seq_dim == 1 else (batch, heads, seq, head_dim)
        return (torch.randn(shape, dtype=torch.float64) * 3).to(dtype=dtype, device=device)

    positions = torch.randint(0, 8000, (seq,) if table_batch is None else (table_batch, seq), device=device)
    inv = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    return make(4, 32), make(2, 40), positions, inv


@pytest.mark.parametrize(("dtype", "interleaved", "seq_dim", "rotary_dim", "in_place"), QK_CASES)
def test_interpreted_qk_kernel_matches_float64(seed, interpreted, dtype, interleaved, seq_dim, rotary_dim, in_place):
    q, k, positions, inv = qk_inputs(device="cpu", dtype=dtype, seq_dim=seq_dim, rotary_dim=rotary_dim, table_batch=2)
    cos, sin = cos_sin(positions, inv)
    cos64, sin64 = cos_sin(positions, inv, dtype=torch.float64)
    want_q = rope_reference(q.double(), cos64, sin64, interleaved=interleaved, seq_dim=seq_dim)
    want_k = rope_reference(k.double(), cos64, sin64, interleaved=interleaved, seq_dim=seq_dim)
    q_in, k_in = q.clone(), k.clone()
    q_out, k_out = (q_in, k_in) if in_place else (torch.full_like(q, 7.0), torch.full_like(k, 7.0))
    assert interpreted.rope_qk_into(q_in, k_in, cos, sin, q_out, k_out, rotary_dim, interleaved, seq_dim)
    torch.testing.assert_close(q_out.double(), want_q, **TOL[dtype])
    torch.testing.assert_close(k_out.double(), want_k, **TOL[dtype])
    assert torch.equal(q_out[..., rotary_dim:], q[..., rotary_dim:])  # pass-through dims copied exactly
    assert torch.equal(k_out[..., rotary_dim:], k[..., rotary_dim:])
    # and the same numbers as rotating each tensor with the one-tensor kernel
    for x, got in ((q, q_out), (k, k_out)):
        one = torch.empty_like(x)
        assert interpreted.rope_into(x, cos, sin, one, rotary_dim, interleaved, seq_dim, False)
        assert torch.equal(got, one)


def test_interpreted_qk_is_one_launch(seed, interpreted, monkeypatch):
    q, k, positions, inv = qk_inputs(device="cpu", dtype=torch.float32, seq_dim=1, rotary_dim=32)
    cos, sin = cos_sin(positions, inv)
    launches = []
    monkeypatch.setattr(interpreted, "_rope_kernel", None)  # the one-tensor kernel must not run
    real = interpreted._rope_qk_kernel

    class Spy:
        def __getitem__(self, grid):
            launches.append(grid)
            return real[grid]

    monkeypatch.setattr(interpreted, "_rope_qk_kernel", Spy())
    assert interpreted.rope_qk_into(q, k, cos, sin, torch.empty_like(q), torch.empty_like(k), 32, False, 1)
    assert launches == [(q.shape[0] * q.shape[1],)]  # one launch, one program per (batch, position) token


def test_interpreted_qk_declines_what_eager_must_do(seed, interpreted):
    q, k, positions, inv = qk_inputs(device="cpu", dtype=torch.float32, seq_dim=1, rotary_dim=32)
    cos, sin = cos_sin(positions, inv)
    k16 = k.to(torch.float16)
    assert interpreted.rope_qk_into(q, k16, cos, sin, torch.empty_like(q), torch.empty_like(k16), 32, False, 1) is False
    kt = k.transpose(-1, -2).contiguous().transpose(-1, -2)  # last dim strided
    assert interpreted.rope_qk_into(q, kt, cos, sin, torch.empty_like(q), torch.empty_like(k), 32, False, 1) is False


# ------------------------------------------------------------------ real GPU: automatic dispatch in apply_rope


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "interleaved", "seq_dim", "rotary_dim", "table_batch"), CASES)
def test_cuda_apply_rope_uses_triton_and_matches_eager(seed, dtype, interleaved, seq_dim, rotary_dim, table_batch):
    assert ropekit.kernels.backend_for(torch.empty(1, device="cuda")) == "triton"
    x, cos, sin = make_inputs(
        device="cuda", dtype=dtype, seq_dim=seq_dim, rotary_dim=rotary_dim, table_batch=table_batch
    )
    expected = eager(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim)
    kw = {"interleaved": interleaved, "seq_dim": seq_dim}
    torch.testing.assert_close(apply_rope(x, cos, sin, **kw), expected, **TOL[dtype])
    out = torch.empty_like(x)
    torch.testing.assert_close(apply_rope(x, cos, sin, out=out, **kw), expected, **TOL[dtype])
    y = x.clone()
    apply_rope(y, cos, sin, inplace=True, **kw)
    torch.testing.assert_close(y, expected, **TOL[dtype])
    assert torch.equal(y[..., rotary_dim:], x[..., rotary_dim:])


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "interleaved", "seq_dim", "rotary_dim", "in_place"),
    [
        (torch.float32, False, 1, 32, False),
        (torch.bfloat16, True, 2, 16, True),
        (torch.float16, False, 2, 32, True),
        (torch.float64, True, 1, 16, False),
    ],
)
def test_cuda_apply_rope_qk_one_launch_matches_float64(seed, dtype, interleaved, seq_dim, rotary_dim, in_place):
    q, k, positions, inv = qk_inputs(device="cuda", dtype=dtype, seq_dim=seq_dim, rotary_dim=rotary_dim)
    # fp64 input keeps fp64 only with fp64 tables (fp32 tables are 3e-7 off, on every backend, eager included)
    cos, sin = cos_sin(positions, inv, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    cos64, sin64 = cos_sin(positions, inv, dtype=torch.float64)
    kw = {"interleaved": interleaved, "seq_dim": seq_dim}
    want_q, want_k = (rope_reference(t.double(), cos64, sin64, **kw) for t in (q, k))
    got_q, got_k = apply_rope_qk(q.clone(), k.clone(), cos, sin, inplace=in_place, **kw)
    torch.testing.assert_close(got_q.double(), want_q, **TOL[dtype])
    torch.testing.assert_close(got_k.double(), want_k, **TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_backward_matches_eager(seed, dtype):
    x, cos, sin = make_inputs(device="cuda", dtype=dtype, seq_dim=2, rotary_dim=16, table_batch=2)
    xg = x.clone().requires_grad_()
    y = apply_rope(xg, cos, sin, seq_dim=2, interleaved=True)
    grad = torch.randn_like(y)
    y.backward(grad)
    expected = eager(grad, cos, sin, interleaved=True, seq_dim=2, conjugate=True)
    torch.testing.assert_close(xg.grad, expected, **TOL[dtype])


@pytest.mark.gpu
def test_cuda_large_prefill_matches_eager(seed):
    """A prefill-sized tensor: many program instances, int64 offsets, GQA key heads."""
    for heads in (32, 8):
        x, cos, sin = make_inputs(
            device="cuda",
            dtype=torch.bfloat16,
            seq_dim=1,
            rotary_dim=128,
            table_batch=None,
            batch=1,
            seq=4096,
            heads=heads,
            head_dim=128,
        )
        torch.testing.assert_close(
            apply_rope(x, cos, sin), eager(x, cos, sin, interleaved=False, seq_dim=1), **TOL[torch.bfloat16]
        )
