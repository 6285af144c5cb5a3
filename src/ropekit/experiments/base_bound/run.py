"""Run the base-bound experiment: train every planned model (resumable), measure it, write results and the page."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ropekit.experiments.base_bound.measure import (
    decay_profile,
    heldout_perplexity,
    overall_accuracy,
    retrieval_by_distance,
)
from ropekit.experiments.base_bound.page import write_page
from ropekit.experiments.base_bound.settings import ExperimentSettings, model_config, planned_models
from ropekit.experiments.base_bound.verdict import conclusion


def run_experiment(
    settings: ExperimentSettings, out: Path, *, on_model: Callable[[str], None] | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train every planned model (resuming finished or interrupted ones), measure, and write the page.

    Writes ``out/models/<label>/`` (checkpoints), ``out/results.json``, ``out/index.html`` and
    ``out/retrieval_vs_distance.png``; returns the payload of ``results.json``.
    """
    from ropekit.eval.models import TinyEvalModel
    from ropekit.model.train import TrainConfig, train

    out.mkdir(parents=True, exist_ok=True)
    results = []
    for plan in planned_models(settings):
        name = plan["label"].replace(" ", "_").replace("×", "x").replace("/", "_").replace("'", "")
        directory = out / "models" / name
        train_settings = TrainConfig(
            steps=settings.steps,
            batch_size=settings.batch_size,
            lr=settings.lr,
            task_fraction=settings.task_fraction,
            seed=settings.seed,
            checkpoint_every=max(50, settings.steps // 5),
            device=settings.device,
        )
        summary = train(
            model_config(settings, plan["base"]), train_settings, directory, progress=progress, init=settings.init
        )
        model = TinyEvalModel(directory)  # scored in chunks by eval.perplexity and eval.passkey
        retrieval = retrieval_by_distance(model, settings)
        row = {
            **plan,
            "wall_time_s": summary["wall_time_s"],
            "heldout": heldout_perplexity(model, settings.context, settings.heldout_windows),
            "retrieval": retrieval,
            "retrieval_overall": overall_accuracy(retrieval),
        }
        if plan["base"] is not None:
            row.update(decay_profile(plan["base"], settings.context, settings.head_dim))
        results.append(row)
        if on_model is not None:
            on_model(plan["label"])
    payload = {"settings": dataclasses.asdict(settings), "models": results, "conclusion": conclusion(results)}
    (out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    write_page(payload, out)
    return payload
