"""What defines a base-bound run: the settings shared by every model, and the bases planned around the bound."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ropekit._costs import ROBUST_AUTO_LIMIT
from ropekit._validate import require_float, require_int
from ropekit.errors import InvalidArgument
from ropekit.model.tiny import TinyConfig
from ropekit.model.tokenizer import byte_ids
from ropekit.synthetic.passkey import minimum_length

#: the keys of :func:`planned_models`' rows, in order
MODEL_KEYS = ("10", "100", "quarter", "half", "init", "smallest", "robust", "robust10", "nope")


@dataclass(frozen=True, kw_only=True)
class ExperimentSettings:
    """Everything that defines a run; identical across the trained models except the position encoding."""

    context: int = 512
    # the bundled tiny model's shape (head_dim 32), so that its weights can start every copy: trained from
    # scratch at 512 for 3000-5000 steps no copy learned retrieval at all (docs/base_bound_experiment.md)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 384
    steps: int = 300
    batch_size: int = 16
    lr: float = 1e-3
    task_fraction: float = 0.5
    seed: int = 0
    trials: int = 400
    distance_bins: int = 8
    heldout_windows: int = 48
    #: where the models train ("cpu" or "cuda"); evaluation always runs on the CPU copies of the checkpoints
    device: str = "cpu"
    #: start every model from this checkpoint ("tiny" = the bundled model) instead of random weights: continued
    #: training with a changed base, the protocol of Men et al.'s fine-tuning runs (None = from scratch)
    init: str | None = "tiny"
    #: train only these of :func:`planned_models`' rows, by key (10, 100, quarter, half, init, smallest, robust,
    #: robust10, nope); None = all
    models: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # store what the checks return (plain Python numbers: numpy scalars would leak into the JSON written)
        names = ("steps", "batch_size", "trials", "distance_bins")
        checked: dict[str, Any] = {name: require_int(name, getattr(self, name), minimum=1) for name in names}
        checked["heldout_windows"] = require_int("heldout_windows", self.heldout_windows, minimum=2)  # a spread
        checked["lr"] = require_float("lr", self.lr, above=0.0)
        # a passkey episode must fit the context; the planned bases need the exact bound with its islands
        checked["context"] = require_int("context", self.context, minimum=2 * minimum_length(byte_ids))
        if checked["context"] > ROBUST_AUTO_LIMIT:
            raise ValueError(
                f"context must be <= {ROBUST_AUTO_LIMIT} (the bound and its islands are planned exactly), "
                f"got {self.context!r}"
            )
        checked["seed"] = require_int("seed", self.seed, minimum=0)
        checked["task_fraction"] = require_float("task_fraction", self.task_fraction, at_least=0.0)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", self.device):
            raise InvalidArgument(
                "device", self.device, "must be 'cpu', 'cuda' or 'cuda:N'", allowed="cpu, cuda, cuda:N"
            )
        if self.models is not None:
            unknown = sorted(set(self.models) - set(MODEL_KEYS))
            if unknown or not self.models:
                message = f"models must be keys from {', '.join(MODEL_KEYS)}; got {', '.join(self.models)!r}"
                raise InvalidArgument("models", self.models, allowed=MODEL_KEYS, message=message)

    def with_shape_of(self, checkpoint: str) -> ExperimentSettings:
        """These settings with the architecture of ``checkpoint`` (so its weights fit) and ``init`` set to it."""
        from ropekit.model.checkpoint import load_tiny_config

        source = load_tiny_config(checkpoint)
        shape = {k: getattr(source, k) for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim")}
        return dataclasses.replace(self, init=checkpoint, **shape)

    @classmethod
    def quick(cls) -> ExperimentSettings:
        """The ``--quick`` mode (< 10 min on 2 cores): four models, 100 steps of 8 sequences, 64 trials.

        Base 100, the bound for L/4, the robust bound and NoPE. On the H100 this split retrieval at the bound
        (robust 89%, the two below-bound bases 0%), with wider intervals than the full run.
        """
        return cls(steps=100, batch_size=8, trials=64, heldout_windows=16, models=("100", "quarter", "robust", "nope"))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def planned_models(settings: ExperimentSettings) -> list[dict[str, Any]]:
    """The bases to train, each with the bound it is compared against; plus NoPE.

    Across the bound for the context L: 10, 100, the smallest feasible base, the robust bound, 10× it. Inside it:
    the smallest feasible bases for L/4 and L/2, whose first negative B_m falls part-way into the context, so one
    model can be compared with itself below and above that distance. With ``init``, also the checkpoint's own
    base (kept, so that model changes nothing but the context it trains at).
    """
    from ropekit.theory import base_bound, smallest_feasible_base

    bound = base_bound(settings.context, settings.head_dim)
    rows = [
        {"key": "10", "label": "base 10", "base": 10.0},
        {"key": "100", "label": "base 100", "base": 100.0},
        {
            "key": "quarter",
            "label": "bound for L/4",
            "base": smallest_feasible_base(settings.context // 4, settings.head_dim),
        },
        {
            "key": "half",
            "label": "bound for L/2",
            "base": smallest_feasible_base(settings.context // 2, settings.head_dim),
        },
    ]
    if settings.init is not None:
        from ropekit.model.checkpoint import load_tiny_config

        source = load_tiny_config(settings.init)
        if source.position == "rope":
            rows.append({"key": "init", "label": f"{settings.init}'s own base", "base": float(source.rope_base)})
    rows += [
        {"key": "smallest", "label": "smallest feasible", "base": float(bound.smallest_base)},
        {"key": "robust", "label": "robust bound", "base": float(bound.robust_base)},
        {"key": "robust10", "label": "10× robust", "base": 10 * float(bound.robust_base)},
        {"key": "nope", "label": "NoPE", "base": None},
    ]
    if settings.models is not None:
        rows = [row for row in rows if row["key"] in settings.models]
    for row in rows:
        row["smallest_base"], row["robust_base"] = float(bound.smallest_base), float(bound.robust_base)
    return rows


def model_config(settings: ExperimentSettings, base: float | None) -> TinyConfig:
    """The tiny model of these settings with RoPE at ``base``, or NoPE for ``None``."""
    return TinyConfig(
        d_model=settings.d_model,
        n_layers=settings.n_layers,
        n_heads=settings.n_heads,
        n_kv_heads=settings.n_kv_heads,
        ffn_dim=settings.ffn_dim,
        train_length=settings.context,
        position="none" if base is None else "rope",
        rope_base=base or 10000.0,
    )
