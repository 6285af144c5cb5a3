"""Stand-ins for the CLI's expensive work, for the CLI fuzz (tests/cli/test_fuzz_cli.py).

Training, the experiment, the evaluation sweeps, the HTML report and the figures are replaced by stand-ins that
keep the library's argument checks (they call the same validating constructors on tiny sizes), and the exact-bound
computations are capped at a small length after checking that the real call would finish.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from ropekit.cli.common import MAX_BOUND_WORK


def install_stand_ins(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """Replace training, the search past its plan, the experiment, the sweeps, the report and the figures with
    stand-ins that keep the library's argument checks, and cap the exact-bound computations at a small length
    (``argv``: the arguments of the example running now, which the caps read: only an explicit ``--robust`` may ask
    for a long robust bound)."""
    import ropekit.eval.report as report
    import ropekit.eval.sweep as sweep
    import ropekit.eval.tasks.run as tasks_run
    import ropekit.eval.tasks.scoring as scoring
    import ropekit.experiments.base_bound as experiment
    import ropekit.model.train as train_module
    import ropekit.theory.bound as bound
    import ropekit.theory.figures as figures

    plan_module = importlib.import_module("ropekit.theory.planning")
    from ropekit.config import RopeConfig
    from ropekit.scaling import LinearScaling, frequencies

    def fake_train(config, settings, out, **kwargs):
        return {"steps": settings.steps, "tokens": 0, "wall_time_s": 0.0, "parameters": 1, "heldout_bpb": 8.0}

    def fake_experiment(settings, out, **kwargs):
        return {"models": [], "conclusion": ["stand-in"]}

    def fake_sweep(model, settings, *, perplexity=True, passkey=True, **kwargs):
        result = sweep.SweepResult({"model": model.describe(), "settings": settings.to_dict()})
        for method in settings.methods:
            for length in settings.lengths(model.train_length, perplexity=perplexity, passkey=False):
                result.perplexity.append(
                    {"method": method, "length": length, "perplexity": 5.0, "inside": 5.0, "beyond": None}
                )
            for length in settings.lengths(model.train_length, perplexity=False, passkey=passkey):
                result.passkey.append(
                    {"method": method, "length": length, "depth": 0.5, "trials": 1, "correct": 1, "accuracy": 1.0}
                )
        return result

    def fake_tasks(model, settings, *, text=None, samples=None, **kwargs):
        context = {"model": model.describe(), "settings": settings.to_dict(), "train_length": model.train_length}
        result = tasks_run.TaskResult(context)
        for method in settings.methods:
            for length in settings.token_lengths(model.train_length):
                for task in settings.tasks:
                    row = {"method": method, "length": length, "task": task, "family": "retrieval"}
                    result.rows.append({**row, **scoring.cell([1.0])})
        return result

    def fake_report(model, settings, result, out, elapsed_s, tasks=None):
        out.mkdir(parents=True, exist_ok=True)
        result.write(out)
        (out / "summary.json").write_text(json.dumps({"findings": ["stand-in"]}))
        (out / "index.html").write_text("<html></html>")
        return out / "index.html"

    def capped(function, limit: int = 512):
        """``function`` at a small length, after checking that the real call would finish: the exact bound's
        cost is L × d (about 4 s for (A) at 1M × 128), and the robust one's islands take minutes above d = 128 or
        L = 64k, which only an explicit ``--robust`` may ask for."""

        def run(length, dim=128, *args, **kwargs):
            if isinstance(length, int) and isinstance(dim, int):
                assert length * dim <= MAX_BOUND_WORK, f"runaway: exact bound at L = {length}, d = {dim}"
                robust = function.__name__ in ("base_bound", "robust_base_only")
                asked = "--robust" in argv
                assert not robust or asked or (dim <= 128 and length <= 65536), f"runaway: robust L={length} d={dim}"
            return function(min(length, limit), dim, *args, **kwargs)

        return run

    def fake_figure(check):
        def draw(path, *args):
            check(*args)
            Path(path).write_bytes(b"stand-in figure")
            return Path(path)

        return draw

    import ropekit.search.pipeline as search_pipeline

    real_search = search_pipeline.search_model

    def planned_search(request, out, *, dry_run=False, **kwargs):
        """The search up to its plan (the model loaded, the samples made, one candidate timed): every check of a
        real search runs, and no search of 96 candidates does."""
        import typer

        planned = real_search(request, out, dry_run=True, **kwargs)
        if dry_run:
            return planned
        raise typer.Exit(0)

    monkeypatch.setattr(search_pipeline, "search_model", planned_search)
    monkeypatch.setattr(train_module, "train", fake_train)
    monkeypatch.setattr(experiment, "run_experiment", fake_experiment)
    monkeypatch.setattr(sweep, "run_sweep", fake_sweep)
    monkeypatch.setattr(tasks_run, "run_tasks", fake_tasks)
    monkeypatch.setattr(report, "write_sweep_report", fake_report)
    for name in ("base_bound", "smallest_feasible_base", "robust_base_only"):
        monkeypatch.setattr(bound, name, capped(getattr(bound, name)))
    for name in ("base_bound", "smallest_feasible_base"):  # plan imported them by name
        monkeypatch.setattr(plan_module, name, capped(getattr(plan_module, name)))
    monkeypatch.setattr(figures, "decay_figure", fake_figure(lambda d, b, m: frequencies(RopeConfig(d, base=b))))

    def bound_figure_work(d, m, r):
        bound.smallest_feasible_base(m, d)
        if r >= 1024:
            bound.base_bound(min(r, m), d)

    monkeypatch.setattr(figures, "bound_figure", fake_figure(bound_figure_work))
    for name in ("wavelengths_figure", "scaling_figure"):
        monkeypatch.setattr(
            figures,
            name,
            fake_figure(lambda d, b, t, s: frequencies(RopeConfig(d, base=b, scaling=LinearScaling(factor=s)))),
        )
