"""Stand-ins for the expensive work of the CLI tests that check what happens before any work."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def no_training(monkeypatch):
    """Replace training with a recorder: these tests check what happens before any work."""
    import ropekit.model.train as train_module

    calls = []

    def fake_train(config, settings, out, **kwargs):
        calls.append((config, settings, Path(out)))
        return {"steps": settings.steps, "tokens": 0, "wall_time_s": 0.0, "parameters": 1, "heldout_bpb": 8.0}

    monkeypatch.setattr(train_module, "train", fake_train)
    return calls


@pytest.fixture
def no_sweep(monkeypatch):
    """Make any sweep an error: a command refused up front never reaches it."""
    import ropekit.eval.sweep as sweep

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep ran before the options were checked")

    monkeypatch.setattr(sweep, "run_sweep", refuse)
