"""Why an Infini-attention tiny checkpoint does (or does not) use its memory: gates, memory norms, how large the
memory read is beside the local attention, and passkey accuracy with the memory emptied before every segment.

Usage (the numbers in docs/infini_attention.md):

    OMP_NUM_THREADS=1 python docs/infini_attention/diagnostics.py runs/infini --out docs/infini_attention/diag.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from ropekit.eval.passkey import passkey_grid
from ropekit.eval.perplexity import perplexity_at
from ropekit.model import load
from ropekit.model.corpus import heldout_bytes
from ropekit.model.infini import elu_plus_one


@torch.no_grad()
def memory_statistics(model, ids: torch.Tensor) -> dict:
    """Per layer and head, over every segment after the first: mean ‖A_mem‖ and ‖A_local‖ per token, the memory's
    share of the gated mix, and ‖M‖ (Frobenius), ‖z‖ per KV head after the whole text."""
    layers = len(model.blocks)
    mem_norm = [0.0] * layers
    loc_norm = [0.0] * layers
    share = [0.0] * layers
    count = 0
    memory = [None] * layers
    keys = [[] for _ in range(layers)]  # σ(K) of every segment so far, per layer
    spread = [None] * layers
    step = model.config.segment_length
    starts = list(range(0, ids.shape[1], step))
    for index, start in enumerate(starts):
        x = model.embed(ids[:, start : start + step])  # (1, segment, d_model)
        for layer, block in enumerate(model.blocks):
            h = block.attn_norm(x)
            local, from_memory, _ = block.attn.parts(h, memory[layer])
            cfg = model.config
            sigma_k = elu_plus_one(block.attn.k_proj(h).view(1, -1, cfg.n_kv_heads, cfg.head_dim))[0]  # (s, kv, hd)
            if index == len(starts) - 1 and keys[layer]:
                # addressing weights of the memory read (exact for the linear rule): w_t ∝ σ(q)·σ(k_t)
                sigma_q = elu_plus_one(block.attn.q_proj(h).view(1, -1, cfg.n_heads, cfg.head_dim))[0]  # (s, h, hd)
                stored = torch.cat(keys[layer]).repeat_interleave(cfg.n_heads // cfg.n_kv_heads, 1)  # (T, h, hd)
                w = torch.einsum("shd,thd->hst", sigma_q, stored)  # (h, s, T)
                w = w / w.sum(-1, keepdim=True)
                spread[layer] = {
                    "stored_tokens": stored.shape[0],
                    "effective_tokens": [round(float(v), 1) for v in (1 / w.square().sum(-1)).mean(-1)],
                    "max_weight": [round(float(v), 5) for v in w.amax(-1).mean(-1)],
                }
            keys[layer].append(sigma_k)
            if index > 0:
                g = torch.sigmoid(block.attn.gate)[None, :, None]  # (1, h, 1)
                m, loc = from_memory.norm(dim=-1), local.norm(dim=-1)  # (1, h, segment)
                mem_norm[layer] += m.sum(-1)[0]
                loc_norm[layer] += loc.sum(-1)[0]
                share[layer] += (g * m / (g * m + (1 - g) * loc)).sum(-1)[0]
            x, memory[layer] = block.segment(x, memory[layer])
        if index > 0:
            count += x.shape[1]

    def listed(values):
        return [[round(float(v) / count, 4) for v in row] for row in values]

    return {
        "tokens": ids.shape[1],
        "gates": model.gate_values(),
        "mean_norm_memory_read": listed(mem_norm),
        "mean_norm_local": listed(loc_norm),
        "memory_share_of_mix": listed(share),
        "memory_frobenius": [[round(float(v), 3) for v in m.matrix[0].norm(dim=(-2, -1))] for m in memory],
        "normaliser_norm": [[round(float(v), 3) for v in m.norm[0].norm(dim=-1)] for m in memory],
        "read_weights_last_segment": spread,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="infini checkpoint directory")
    parser.add_argument("--multiples", default="1,2,4,8")
    parser.add_argument("--depths", default="0,0.25,0.5,0.75,1")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load(args.model).eval()
    text = torch.frombuffer(bytearray(heldout_bytes()), dtype=torch.uint8).long()
    train = model.config.train_length
    stats = memory_statistics(model, text[None, : 8 * train])

    def emptied(ids: torch.Tensor) -> torch.Tensor:
        """The memory emptied before every segment: A = (1 − sigmoid(β)) · A_local, nothing crosses segments."""
        step = model.config.segment_length
        return torch.cat([model.forward_segments(ids[:, s : s + step])[0] for s in range(0, ids.shape[1], step)], 1)

    filler = text.numpy().astype(np.int64)
    lengths = [int(float(m) * train) for m in args.multiples.split(",")]
    depths = [float(d) for d in args.depths.split(",")]
    passkey = {}
    for name, fn in (("trained", model), ("memory emptied every segment", emptied)):
        with torch.no_grad():
            cells = passkey_grid(fn, filler, lengths, depths, trials=args.trials, seed=0)
        passkey[name] = {
            n: sum(c.correct for c in cells if c.length == n) / sum(c.trials for c in cells if c.length == n)
            for n in lengths
        }
        passkey[name + " by depth"] = {f"{c.length}@{c.depth}": c.accuracy for c in cells}
    perplexity = {}
    for name, fn in (("trained", model), ("memory emptied every segment", emptied)):
        with torch.no_grad():
            points = [perplexity_at(fn, text, n, train, max_tokens=8192) for n in lengths]
        perplexity[name] = {p.length: round(p.perplexity, 4) for p in points}
    result = {"model": args.model, "memory": stats, "passkey": passkey, "perplexity": perplexity}
    text_out = json.dumps(result, indent=1)
    print(text_out)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text_out + "\n")


if __name__ == "__main__":
    main()
