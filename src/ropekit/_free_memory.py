"""Free memory where a run happens: what an evaluation or a fine-tune may still use."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def available_memory(device: torch.device | None = None) -> int | None:
    """Free bytes on ``device``: on CUDA ``torch.cuda.mem_get_info``; elsewhere the host's ``MemAvailable`` (psutil
    when installed, else ``/proc/meminfo``); ``None`` where the system does not say."""
    if device is not None and device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
