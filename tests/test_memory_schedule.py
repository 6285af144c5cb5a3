"""The one free-memory reader and the one learning-rate schedule that the evaluations and both trainings share."""

from __future__ import annotations

import io
import math
import sys

import pytest

from ropekit import _free_memory
from ropekit._schedule import warmup_cosine


def test_free_memory_is_read_from_meminfo_without_psutil(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)  # an import of psutil fails
    text = "MemTotal:       16000000 kB\nMemAvailable:    1234567 kB\n"
    monkeypatch.setattr(_free_memory, "open", lambda path: io.StringIO(text), raising=False)
    assert _free_memory.available_memory() == 1234567 * 1024


def test_free_memory_is_none_where_the_system_does_not_say(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)

    def missing(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(_free_memory, "open", missing, raising=False)
    assert _free_memory.available_memory() is None


def test_both_trainings_follow_one_schedule():
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.model.train import TrainConfig, learning_rate

    tiny = TrainConfig(steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    fine = FinetuneSettings(target_length=64, steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    for step in (0, 5, 9, 10, 35, 60, 109):
        progress = min(1.0, max(0, step - 10) / 100)
        closed = (step + 1) / 10 if step < 10 else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
        assert learning_rate(tiny, step, progress) == pytest.approx(closed, abs=1e-15)
        assert fine.lr_factor(step) == pytest.approx(closed, abs=1e-15)
    assert warmup_cosine(3.0, 4, warmup=10, progress=0.0, floor=0.1) == 3.0 * 5 / 10
