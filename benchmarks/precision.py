"""Precision of fp32 RoPE tables and rotated vectors at every position up to 2**20: ropekit vs transformers.

Run: ``python benchmarks/precision.py`` (about a minute on 2 cores; ``--max-position`` to change the range).

Both paths produce fp32 cos/sin for d = 128, b = 1e4:

* ropekit ``cos_sin``: angles position · inv_freq formed in float64, cos/sin in float64, one cast to fp32;
* transformers ``LlamaRotaryEmbedding``: inv_freq in fp32, positions as fp32, angles by an fp32 matmul.

Each is compared with an independent float64 reference, e^{i(m0+k)θ} = e^{im0θ}·e^{ikθ} in complex128 from a
1024-entry table of e^{ikθ} (error ~1e-15), and so are q vectors (standard normal, one head) rotated by each
path's own apply function (``apply_rope``; transformers' ``apply_rotary_pos_emb``), half-split layout.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from ropekit import apply_rope, cos_sin, inv_freq

BLOCK = 1024


def reference(start: int, stop: int, theta: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """complex128 e^{imθ} for m in [start, stop) (start a multiple of BLOCK): ``(stop - start, d/2)``."""
    starts = np.arange(start, stop, BLOCK, dtype=np.float64)
    table = np.exp(1j * np.outer(starts, theta))[:, None, :] * inner[None]  # (blocks, BLOCK, d/2)
    return table.reshape(-1, len(theta))[: stop - start]


def transformers_rope(head_dim: int, base: float, max_position: int):
    """transformers' own Llama rotary module (fp32 path) and its apply function."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(
        hidden_size=head_dim,
        num_attention_heads=1,
        head_dim=head_dim,
        max_position_embeddings=max_position + 1,
        rope_parameters={"rope_type": "default", "rope_theta": base},
    )
    return LlamaRotaryEmbedding(config), apply_rotary_pos_emb


def rotate_reference(q: torch.Tensor, ref: np.ndarray) -> torch.Tensor:
    """float64 half-split rotation of ``q`` ``(1, seq, 1, d)`` by the complex table ``ref`` ``(seq, d/2)``."""
    half = q.shape[-1] // 2
    z = torch.complex(q[..., :half].double(), q[..., half:].double()) * torch.from_numpy(ref)[None, :, None]
    return torch.cat((z.real, z.imag), dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-position", type=int, default=2**20)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--base", type=float, default=10000.0)
    parser.add_argument("--chunk", type=int, default=2**16, help="positions per chunk (a multiple of 1024)")
    args = parser.parse_args()
    d, base, n = args.head_dim, args.base, args.max_position + 1
    theta = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    inner = np.exp(1j * np.outer(np.arange(BLOCK, dtype=np.float64), theta))  # (BLOCK, d/2)
    freqs = inv_freq(d, base)
    hf_module, hf_apply = transformers_rope(d, base, args.max_position)
    generator = torch.Generator().manual_seed(0)

    worst = {name: np.zeros(3) for name in ("ropekit", "transformers")}  # cos, sin, rotated q
    began = time.perf_counter()
    for start in range(0, n, args.chunk):
        stop = min(start + args.chunk, n)
        ref = reference(start, stop, theta, inner)
        positions = torch.arange(start, stop)
        q = torch.randn(1, stop - start, 1, d, generator=generator)  # (batch, seq, heads, head_dim)
        q_ref = rotate_reference(q, ref)

        cos, sin = cos_sin(positions, freqs)
        q_rot = apply_rope(q, cos, sin)
        errors = (np.abs(cos.numpy() - ref.real).max(), np.abs(sin.numpy() - ref.imag).max())
        worst["ropekit"] = np.maximum(worst["ropekit"], [*errors, float((q_rot.double() - q_ref).abs().max())])

        hf_cos, hf_sin = hf_module(q, positions[None])  # (1, seq, d): halves repeated
        hf_q, _ = hf_apply(q, q, hf_cos, hf_sin, unsqueeze_dim=2)
        half = d // 2
        errors = (
            np.abs(hf_cos[0, :, :half].numpy() - ref.real).max(),
            np.abs(hf_sin[0, :, :half].numpy() - ref.imag).max(),
        )
        worst["transformers"] = np.maximum(worst["transformers"], [*errors, float((hf_q.double() - q_ref).abs().max())])
    elapsed = time.perf_counter() - began

    print(f"fp32 RoPE precision, d={d}, base={base:g}, every position 0..{args.max_position} ({elapsed:.0f} s)")
    print(f"{'path':<34} {'max |cos err|':>14} {'max |sin err|':>14} {'max |rotated q err|':>20}")
    labels = {
        "ropekit": "ropekit cos_sin (float64 angles)",
        "transformers": "transformers LlamaRotaryEmbedding",
    }
    for name, (cos_err, sin_err, q_err) in worst.items():
        print(f"{labels[name]:<34} {cos_err:>14.2e} {sin_err:>14.2e} {q_err:>20.2e}")
    print("q ~ N(0, 1), one head, half-split; reference: complex128 angle addition (error ~1e-15)")


if __name__ == "__main__":
    main()
