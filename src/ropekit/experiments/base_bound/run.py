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

#: what the experiment writes at the top of its folder (beside ``models/``, the resumable training runs)
PAGE_FILES = ("results.json", "index.html", "retrieval_vs_distance.png")


def run_experiment(
    settings: ExperimentSettings,
    out: Path,
    *,
    on_model: Callable[[str], None] | None = None,
    progress: bool = True,
    force: bool = False,
) -> dict[str, Any]:
    """Train every planned model (resuming finished or interrupted ones), measure, and write the page.

    Writes ``out/models/<label>/`` (checkpoints), ``out/results.json``, ``out/index.html`` and
    ``out/retrieval_vs_distance.png``; returns the payload of ``results.json``. Existing page files, and checkpoint
    files in a model folder that holds no run to resume, are refused before any training unless ``force``
    (:mod:`ropekit._output`: they are replaced then, and every other file is left alone); the page is written
    beside ``out`` and renamed into it.
    """
    from ropekit._output import refuse_existing, staged_output
    from ropekit.eval.models import TinyEvalModel
    from ropekit.model.train import TrainConfig, check_train_out, train

    refuse_existing(out, PAGE_FILES, force=force)
    if (out / "models").is_symlink() or ((out / "models").exists() and not (out / "models").is_dir()):
        raise FileExistsError(f"out {str(out)!r} holds models, not a folder: the experiment keeps its runs there")
    folders = {plan["label"]: out / "models" / _folder_name(plan["label"]) for plan in planned_models(settings)}
    for directory in folders.values():
        check_train_out(directory, force=force)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for plan in planned_models(settings):
        directory = folders[plan["label"]]
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
            model_config(settings, plan["base"]),
            train_settings,
            directory,
            progress=progress,
            init=settings.init,
            force=force,
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
    with staged_output(out, force=force) as staged:
        (staged / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
        write_page(payload, staged)
    return payload


def _folder_name(label: str) -> str:
    """The folder of a model's training run under ``models/``."""
    return label.replace(" ", "_").replace("×", "x").replace("/", "_").replace("'", "")
