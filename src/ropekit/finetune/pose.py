"""PoSE position ids: train on a short window whose positions skip, so that the samples cover the target length.

PoSE (Zhu et al. 2023, "PoSE: Efficient Context Window Extension of LLMs via Positional Skip-wise Training",
arXiv 2309.10400, §3.2): the training window of ``W`` tokens is cut into ``N`` chunks ``c_0 … c_{N−1}`` of lengths
``l_i`` (``Σ l_i = W``); chunk ``i`` keeps its tokens contiguous and its positions are

    Pos(c_i) = {st_i + u_i, …, st_i + u_i + l_i − 1},   st_i = Σ_{j<i} l_j,

with skipping biases ``0 = u_0 ≤ u_1 ≤ … ≤ u_{N−1} ≤ L_t − W`` drawn uniformly (the paper's ``u_i ~ U(S)`` with
``u_i ≥ u_{i−1}``), so positions are strictly increasing, start at 0 and stay below the target length ``L_t``. The
chunk boundaries are drawn uniformly too (every chunk at least one token); the paper uses ``N = 2``. Over many
samples every relative distance ``1 … L_t − 1`` occurs: between the two chunks it is ``(j − i) + u_1`` with
``j − i ∈ [1, W − 1]`` and ``u_1 ∈ [0, L_t − W]``.

Each sample's ids are a function of ``(seed, sample index)`` alone, so a resumed run draws the same positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ropekit._validate import require_int
from ropekit.errors import InvalidArgument

#: mixes the sample index into the seed (a large odd constant: distinct samples get unrelated generators)
_INDEX_STRIDE = 1_000_003


@dataclass(frozen=True, kw_only=True)
class PoseSettings:
    """How PoSE position ids are drawn.

    Attributes:
        window: tokens per training sample (``W``).
        target_length: the context length the positions span (``L_t`` >= ``W``).
        chunks: chunks per window (``N``, default 2 as in the paper; at most ``window``). With ``window ==
            target_length`` there is nothing to skip and the ids are ``0 … W − 1``.
        seed: the draws are a function of ``(seed, sample index)``.

    Raises:
        ValueError: a count out of range, naming the field.
    """

    window: int
    target_length: int
    chunks: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "window", require_int("window", self.window, minimum=2))
        object.__setattr__(self, "target_length", require_int("target_length", self.target_length, minimum=self.window))
        object.__setattr__(self, "chunks", require_int("chunks", self.chunks, minimum=1))
        if self.chunks > self.window:
            window = self.window
            raise InvalidArgument(
                "chunks",
                self.chunks,
                allowed=f"<= {window}",
                message=lambda n: (
                    f"{n('chunks')} must be at most {n('window', window)} (one token per chunk), got {self.chunks}"
                ),
            )
        object.__setattr__(self, "seed", require_int("seed", self.seed, minimum=0))

    def position_ids(self, index: int) -> torch.Tensor:
        """The position ids of training sample ``index``.

        Shapes:
            → ``(window,)`` int64, strictly increasing, in ``[0, target_length)``, first 0.
        """
        window, spare = self.window, self.target_length - self.window
        if self.chunks == 1 or spare == 0:
            return torch.arange(window, dtype=torch.int64)
        generator = torch.Generator().manual_seed(self.seed * _INDEX_STRIDE + int(index))
        cuts = torch.randperm(window - 1, generator=generator)[: self.chunks - 1] + 1  # distinct, in [1, W − 1]
        cuts = torch.sort(cuts).values
        skips = torch.sort(torch.randint(0, spare + 1, (self.chunks - 1,), generator=generator)).values
        chunk = torch.bucketize(torch.arange(window), cuts, right=True)  # (window,) chunk index of each token
        bias = torch.cat([torch.zeros(1, dtype=torch.int64), skips])  # u_0 = 0, u_1 <= ... <= u_{N-1}
        return torch.arange(window, dtype=torch.int64) + bias[chunk]

    def batch(self, indices: torch.Tensor) -> torch.Tensor:
        """Position ids of the samples ``indices``.

        Shapes:
            indices ``(batch,)`` → ``(batch, window)`` int64.
        """
        return torch.stack([self.position_ids(int(i)) for i in indices])

    def to_dict(self) -> dict[str, int]:
        return {"window": self.window, "target_length": self.target_length, "chunks": self.chunks, "seed": self.seed}
