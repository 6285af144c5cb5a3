"""KV-cached decoding of the tiny model. Oracle: one eager forward of the whole sequence."""

from __future__ import annotations

import pytest
import torch

from ropekit.model.kv_cache import KVCache
from ropekit.model.tiny import TinyConfig, TinyLM

SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 64}


@pytest.mark.parametrize("chunks", [(5, 1, 1, 1), (4, 3, 2, 1), (1, 1, 1, 1, 1, 1, 1, 1)])
def test_chunked_decoding_equals_one_forward(seed, chunks):
    model = TinyLM(TinyConfig(**SMALL)).eval()
    ids = torch.randint(0, 256, (2, sum(chunks)))
    cache, outs, start = KVCache(), [], 0
    with torch.no_grad():
        for n in chunks:
            outs.append(model(ids[:, start : start + n], cache=cache))
            start += n
        want = model(ids)
    assert cache.length() == ids.shape[1] and len(cache.keys) == SMALL["n_layers"]
    torch.testing.assert_close(torch.cat(outs, dim=1), want, rtol=0, atol=1e-5)


def test_cache_is_refused_where_it_does_not_apply():
    infini = TinyLM(TinyConfig(**SMALL, position="infini", segment_length=4))
    with pytest.raises(ValueError, match="cache must be None"):
        infini(torch.zeros(1, 3, dtype=torch.long), cache=KVCache())
