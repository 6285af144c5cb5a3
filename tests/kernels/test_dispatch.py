"""ropekit.kernels (the package's __init__): backend choice, the eager reference it falls back to, and writes into
tensors that autograd sees as it sees torch's own in-place ops (the oracle: the eager path raises what torch raises)."""

from __future__ import annotations

import pytest
import torch

from ropekit.functional import apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels import _cpu, apply_rope_into, backend_for
from ropekit.kernels.reference import rope_reference
from ropekit.scaling import inv_freq

D = 16


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


# ---------------------------------------------------------------- writes into tensors are tracked by autograd


def _tables(n: int, d: int = D, dtype=torch.float32):
    return cos_sin(torch.arange(n), inv_freq(d, 10000.0), dtype=dtype)


@pytest.fixture(scope="module")
def cpu_kernel():
    if backend_for(torch.zeros(1)) != "cpu":
        pytest.skip("the C++ CPU kernel is unavailable here")
    return _cpu.load(wait=True)


@pytest.mark.parametrize("mode", ["inplace", "out"])
def test_kernel_write_after_save_raises_like_torch(cpu_kernel, mode):
    """The reproduction: a tensor saved for backward, then rotated in place under no_grad."""
    cos, sin = _tables(4)
    leaf = torch.randn(1, 4, 2, D, requires_grad=True)
    y = leaf * 3
    z = (y * y).sum()  # saves y for the backward
    with torch.no_grad():
        if mode == "inplace":
            apply_rope(y, cos, sin, inplace=True)
        else:
            apply_rope(torch.randn(1, 4, 2, D), cos, sin, out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_eager_path_raises_the_same(monkeypatch):
    """The oracle: torch's own in-place ops (the eager path) raise in the same situation."""
    cos, sin = _tables(4)
    leaf = torch.randn(1, 4, 2, D, requires_grad=True)
    y = leaf * 3
    z = (y * y).sum()
    with torch.no_grad():
        rope_reference(y, cos, sin, out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_version_counter_bumped_by_every_write(cpu_kernel):
    cos, sin = _tables(4)
    x = torch.randn(1, 4, 2, D)
    before = x._version
    apply_rope(x, cos, sin, inplace=True)
    assert x._version > before
    out = torch.empty_like(x)
    before = out._version
    apply_rope(x, cos, sin, out=out)
    assert out._version > before


def test_inference_tensor_is_not_written_outside_inference_mode(cpu_kernel):
    cos, sin = _tables(4)
    with torch.inference_mode():
        x = torch.randn(1, 4, 2, D)
    saved = x.clone()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        apply_rope(x, cos, sin, inplace=True)
    assert torch.equal(x, saved)
    with torch.inference_mode():  # inside inference mode it is allowed, as for torch's ops
        y = apply_rope(x, cos, sin, inplace=True)
    assert torch.equal(y, rope_reference(saved, cos, sin))


def test_correct_gradient_when_no_conflict(cpu_kernel):
    """Nothing saved the tensor: in-place rotation under no_grad leaves the true gradient (18 = 2·3·3)."""
    cos, sin = _tables(4)
    leaf = torch.ones(1, 4, 2, D, requires_grad=True)
    z = (leaf * 3 * 3).sum()
    y = (leaf * 3).detach()
    with torch.no_grad():
        apply_rope(y, cos, sin, inplace=True)
    z.backward()
    assert torch.all(leaf.grad == 9)


# ---------------------------------------------------------------- apply_rope_qk's one call into C++


def test_apply_rope_qk_takes_the_one_call_entry(cpu_kernel, monkeypatch):
    """One call into C++ for q and k together (decode's hot path), and the same bits as the reference."""
    entry = _cpu.load_qk()
    calls = []

    def counting(*args):
        result = entry(*args)
        calls.append(result[0])
        return result

    monkeypatch.setattr(_cpu, "_loaded_qk", counting)
    cos, sin = cos_sin(torch.arange(7, 15).unsqueeze(1), inv_freq(D, 10000.0))  # per-row positions, decode
    q, k = torch.randn(8, 1, 4, D).bfloat16(), torch.randn(8, 1, 2, D).bfloat16()
    q_ref, k_ref = rope_reference(q, cos, sin), rope_reference(k, cos, sin)
    q_rot, k_rot = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert calls == [True]
    assert torch.equal(q_rot, q_ref) and torch.equal(k_rot, k_ref)
    with pytest.raises(ValueError, match=r"cos/sin cover 1 positions but x has 3 .*\(x is q here\)"):
        apply_rope_qk(torch.randn(8, 3, 4, D), k, cos, sin)  # declined by the entry, message from Python
    assert calls == [True, False]
