"""ropekit.kernels (the package's __init__): backend choice and the eager reference it falls back to."""

from __future__ import annotations

import pytest
import torch

from ropekit.functional import apply_rope, cos_sin
from ropekit.kernels import _cpu, apply_rope_into, backend_for
from ropekit.kernels.reference import rope_reference


def inputs(seq_dim: int = 1, dtype: torch.dtype = torch.float32):
    torch.manual_seed(0)
    x = torch.randn((2, 5, 3, 16) if seq_dim == 1 else (2, 3, 5, 16), dtype=dtype)
    inv = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    cos, sin = cos_sin(torch.arange(100, 105), inv, dtype=dtype)
    return x, cos, sin


def test_cpu_tensors_get_the_cpu_kernel_when_it_builds():
    expected = "cpu" if _cpu.find_compiler() and _cpu.load(wait=True) is not None else "eager"
    assert backend_for(torch.zeros(1)) == expected


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("seq_dim", [1, 2])
def test_conjugate_rotation_undoes_the_rotation(interleaved, seq_dim):
    """R(−θ) R(θ) = I: the backward's rotation inverts the forward's (fp64 so the check is tight)."""
    x, cos, sin = inputs(seq_dim, torch.float64)  # fp64 tables too, so cos² + sin² = 1 to 1e-16
    kw = {"interleaved": interleaved, "seq_dim": seq_dim}
    y = rope_reference(x, cos, sin, out=torch.empty_like(x), **kw)
    back = rope_reference(y, cos, sin, out=torch.empty_like(x), conjugate=True, **kw)
    torch.testing.assert_close(back, x, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(y, x)


def test_declined_inputs_fall_back_to_eager(monkeypatch):
    x, cos, sin = inputs()
    monkeypatch.setattr(_cpu, "_loaded", lambda *args: False)  # a kernel that declines everything
    out = torch.empty_like(x)
    assert apply_rope_into(x, cos, sin, out, rotary_dim=16, interleaved=False, seq_dim=1) is out
    assert torch.equal(out, rope_reference(x, cos, sin))


def test_missing_kernel_uses_eager(monkeypatch):
    x, cos, sin = inputs()
    monkeypatch.setattr(_cpu, "_loaded", None)
    assert torch.equal(apply_rope(x, cos, sin), rope_reference(x, cos, sin))


def test_torch_compile_traces_the_eager_path(monkeypatch):
    """Under torch.compile the opaque extension call would break the graph; the eager ops are traced instead."""

    def never(*args):
        raise AssertionError("the compiled kernel must not be called while dynamo traces")

    monkeypatch.setattr(_cpu, "_loaded", never)
    x, cos, sin = inputs(seq_dim=2)
    fn = torch.compile(lambda t: apply_rope(t, cos, sin, seq_dim=2, interleaved=True), backend="eager", fullgraph=True)
    assert torch.equal(fn(x), rope_reference(x, cos, sin, seq_dim=2, interleaved=True))
