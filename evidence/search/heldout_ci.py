"""Held-out needle loss per sample for the search and every compared method, with 95% bootstrap intervals of the
mean (10,000 resamples, seeded), on the very held-out samples the search scored (rebuilt from its settings).

Usage: PYTHONPATH=src python evidence/search/heldout_ci.py evidence/search/tiny_4x > evidence/search/tiny_4x/heldout_ci.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from ropekit.eval.methods import configure, restore
from ropekit.search.objective import answer_losses, longrope_of
from ropekit.search.request import SearchRequest
from ropekit.search.run import prepare

folder = Path(sys.argv[1])
data = json.loads((folder / "search.json").read_text())
settings = {k: v for k, v in data["settings"].items() if k in SearchRequest.__dataclass_fields__}
prepared = prepare(SearchRequest(**settings))
model, samples = prepared.model, prepared.heldout


def per_sample() -> np.ndarray:
    losses = answer_losses(model, samples)  # (sum of answer lengths,)
    return np.array([chunk.mean().item() for chunk in torch.split(losses, list(samples.answer_lens))])


def interval(values: np.ndarray) -> list[float]:
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), (10_000, len(values)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


rows = {}
scalings = {"searched": data["long_factor"], **{f"longrope[{k}]": v["factors"] for k, v in data["seeds"].items()}}
for name, factors in scalings.items():
    model.set_scaling(longrope_of(factors, original_length=prepared.original_length, factor=prepared.factor))
    values = per_sample()
    rows[name] = {"mean": float(values.mean()), "ci95": interval(values)}
for method in ("none", "linear", "ntk", "yarn", "llama3", "self_extend"):
    configure(
        model,
        method,
        length=prepared.target_length,
        train_length=prepared.original_length,
        factor=prepared.factor,
        params={},
    )
    values = per_sample()
    restore(model, method)
    rows[method] = {"mean": float(values.mean()), "ci95": interval(values)}
print(
    json.dumps({"samples": len(samples.answer_lens), "target_length": prepared.target_length, "rows": rows}, indent=2)
)
