"""torch.compile(fullgraph=True) of RotaryEmbedding, the tiny model (prefill and a KV-cached decode loop) and a
transformers Llama patched by ``apply_scaling``.

Graphs are counted by a compile backend that records every graph dynamo hands it: one graph per compiled region
means no graph break, and the count not growing over 20 decode steps of growing length means no recompilation
(``dynamic=True``: the cached length is one symbolic size). The default suite runs dynamo's capture with the
captured graph executed as is (fast); the ``slow`` test runs inductor's generated code. Oracle: the eager
module, and for the decode loop an eager full forward of the whole sequence (to 1e-6).
"""

from __future__ import annotations

import pytest
import torch

from helpers.hf_models import byte_llama, random_hf_model
from ropekit import RopeConfig, RotaryEmbedding
from ropekit.model.kv_cache import KVCache
from ropekit.model.tiny import TinyConfig, TinyLM

SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 64}
PREFILL, STEPS = 11, 20  # a prefill length that differs from every static size (duck shaping would tie them)


class Counting:
    """A torch.compile backend that counts the graphs it receives and runs each with ``backend`` (or as is)."""

    def __init__(self, backend: str | None = None) -> None:
        self.graphs = 0
        self.backend = backend

    def __call__(self, gm: torch.fx.GraphModule, inputs):
        self.graphs += 1
        if self.backend is None:
            return gm.forward
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, inputs)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _decode(model, compiled, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill ``PREFILL`` tokens, then decode the rest one by one: (logits of every position, eager full)."""
    cache = KVCache()
    with torch.no_grad():
        outs = [compiled(ids[:, :PREFILL].clone(), cache=cache)]
        for t in range(PREFILL, ids.shape[1]):
            outs.append(compiled(ids[:, t : t + 1].clone(), cache=cache))  # a fresh tensor, as sampled tokens are
        return torch.cat(outs, dim=1), model(ids)


def test_rotary_embedding_compiles_in_one_graph_and_equals_eager():
    rotary = RotaryEmbedding(RopeConfig(16))
    backend = Counting()
    compiled = torch.compile(rotary, fullgraph=True, backend=backend)
    q, k = torch.randn(2, 5, 4, 16), torch.randn(2, 5, 2, 16)
    for positions in (None, torch.arange(100, 105), torch.arange(2**40, 2**40 + 5)):
        got, want = compiled(q, k, positions), rotary(q, k, positions)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert backend.graphs <= 2  # default positions, then explicit positions: no break, no per-value recompile
    explained = torch._dynamo.explain(rotary)(q, k, torch.arange(5))
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_compiled_rotary_refuses_what_eager_refuses():
    rotary = RotaryEmbedding(RopeConfig(16), max_positions=50)
    compiled = torch.compile(rotary, fullgraph=True, backend=Counting())
    q = torch.randn(1, 3, 2, 16)
    assert torch.equal(compiled(q, q, torch.arange(3))[0], rotary(q, q, torch.arange(3))[0])
    with pytest.raises(ValueError, match=">= 0"):
        rotary(q, q, torch.tensor([0, -1, 2]))
    with pytest.raises(RuntimeError, match=">= 0"):
        compiled(q, q, torch.tensor([0, -1, 2]))
    with pytest.raises(ValueError, match="max_positions=50"):
        rotary(q, q, torch.tensor([0, 50, 2]))
    with pytest.raises(RuntimeError, match="max_positions=50"):
        compiled(q, q, torch.tensor([0, 50, 2]))


def test_tiny_model_prefill_and_decode_compile_once_each():
    torch.manual_seed(0)
    model = TinyLM(TinyConfig(**SMALL)).eval()
    backend = Counting()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    ids = torch.randint(0, 256, (1, PREFILL + STEPS))
    got, want = _decode(model, compiled, ids)
    assert backend.graphs == 2  # prefill, decode: no graph break, no recompilation over the 20 steps
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_compiled_tiny_model_refuses_positions_beyond_its_limit():
    model = TinyLM(TinyConfig(**SMALL, max_positions=64)).eval()
    compiled = torch.compile(model, fullgraph=True, backend=Counting())
    ids = torch.randint(0, 256, (1, 4))
    with pytest.raises(ValueError, match="max_positions=64"):
        model(ids, torch.arange(62, 66))
    with torch.no_grad(), pytest.raises(RuntimeError, match="max_positions=64"):
        compiled(ids, torch.arange(62, 66))


def _patched_llama():
    from ropekit.integrations.hf.patch_rope import apply_scaling
    from ropekit.scaling.registry import get_scaling

    options = {"vocab": 64, "hidden": 32, "positions": 64, "bos_token_id": 1, "eos_token_id": 2}
    model = random_hf_model("llama", **byte_llama(**options)).eval()
    return apply_scaling(model, get_scaling("yarn").make(factor=2.0, original_max_position_embeddings=64))


def _hf_decode(model, compiled, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        outs = [compiled(ids[:, :PREFILL].clone(), cache, torch.arange(PREFILL)[None])]
        for t in range(PREFILL, ids.shape[1]):
            outs.append(compiled(ids[:, t : t + 1].clone(), cache, torch.tensor([[t]])))
        return torch.cat(outs, dim=1), model(ids, use_cache=False).logits


@pytest.mark.hf
@pytest.mark.slow  # about 30 s of dynamo tracing on a 2-core machine
def test_patched_llama_prefill_and_decode_compile_once_each():
    pytest.importorskip("transformers")
    model = _patched_llama()
    backend = Counting()

    def step(ids, cache, positions):
        return model(ids, past_key_values=cache, position_ids=positions, use_cache=True).logits

    compiled = torch.compile(step, fullgraph=True, dynamic=True, backend=backend)
    ids = torch.randint(0, 64, (1, PREFILL + STEPS))
    got, want = _hf_decode(model, compiled, ids)
    assert backend.graphs == 2
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    explained = torch._dynamo.explain(lambda x: model(x, use_cache=False).logits)(ids)
    assert explained.graph_break_count == 0


@pytest.mark.slow
def test_inductor_code_equals_eager():
    """The same with inductor's generated code (minutes of compiling on a small CPU). Inductor may hand dynamo
    more than one graph while compiling a region; what must hold is no new graph once decoding has started."""
    rotary = RotaryEmbedding(RopeConfig(16))
    q, k = torch.randn(2, 5, 4, 16), torch.randn(2, 5, 2, 16)
    compiled = torch.compile(rotary, fullgraph=True)
    positions = torch.arange(7, 12)
    torch.testing.assert_close(compiled(q, k, positions), rotary(q, k, positions), rtol=0, atol=1e-6)
    torch.manual_seed(0)
    model = TinyLM(TinyConfig(**SMALL)).eval()
    backend = Counting("inductor")
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    ids = torch.randint(0, 256, (1, PREFILL + STEPS))
    cache, outs = KVCache(), []
    with torch.no_grad():
        outs.append(compiled(ids[:, :PREFILL].clone(), cache=cache))
        outs.append(compiled(ids[:, PREFILL : PREFILL + 1].clone(), cache=cache))
        graphs = backend.graphs
        for t in range(PREFILL + 1, ids.shape[1]):
            outs.append(compiled(ids[:, t : t + 1].clone(), cache=cache))
        want = model(ids)
    assert backend.graphs == graphs  # no recompilation over the decode steps
    torch.testing.assert_close(torch.cat(outs, dim=1), want, rtol=0, atol=1e-6)
