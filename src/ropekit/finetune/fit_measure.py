"""Measuring a training step's memory on the device (for :mod:`ropekit.finetune.fit`): the peak a
step allocates (CUDA allocator, or torch's profiler on CPU) and the bytes alive between steps."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def measure_step(step: Callable[[], None], device: torch.device | None = None) -> int:
    """Peak bytes allocated by ``step()`` above what was allocated when it started: on CUDA the allocator's peak, on
    CPU the running sum of torch's profiler memory events (every allocation and free, in order)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - start)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step()
    events = [e for e in profiler.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()
        peak = max(peak, current)
    return peak


def resident_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the weights and the optimizer state (the memory alive between steps)."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    state = sum(
        v.numel() * v.element_size() for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)
    )
    return weights + state
