"""vLLM: its own rotary-embedding module (``get_rope``), built on CPU in its own environment and run in a subprocess.

vLLM's pins fight ropekit's, so it lives in a separate virtual environment (``make vllm-env``:
``.venv-vllm``, vLLM installed with ``--no-deps`` beside the same torch, plus the small packages its rotary imports
need). :mod:`ropekit.engines._vllm_probe` runs there: ``get_rope(head_size, max_position, is_neox_style,
rope_parameters, dtype)`` under ``set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu")))``,
then ``forward_native(positions, q, k)`` on the probe vectors: vLLM's own arithmetic (``cos_sin_cache``, ``mscale``).

By design vLLM builds one static table for ``--max-model-len``: LongRoPE's list is chosen by it (long when it
exceeds L0, at every position), and ``dynamic`` is static NTK at the maximum length. Its LongRoPE reads
``short_mscale``/``long_mscale``, not ``attention_factor``. The rotary module is compared (tables), not a model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import Answer, EngineRow, Probe, judge, positions_below

NAME = "vLLM"
#: the interpreter of the vLLM environment (``ROPEKIT_VLLM_PYTHON`` overrides)
DEFAULT_PYTHON = ".venv-vllm/bin/python"


def python() -> Path | None:
    """The vLLM environment's interpreter, if there is one."""
    path = Path(os.environ.get("ROPEKIT_VLLM_PYTHON", DEFAULT_PYTHON))
    return path if path.is_file() else None


def launch(config: dict[str, Any], probe: Probe, folder: Path) -> str:
    """vLLM's launch line for the folder (:func:`ropekit.engines.launch.launch_lines`)."""
    from ropekit.engines.launch import launch_lines

    return launch_lines(config, probe.target_length, folder=folder)[NAME].text()


def known_behaviours(config: dict[str, Any], probe: Probe) -> list[str]:
    params = config.get("rope_parameters") or {}
    kind = params.get("rope_type")
    reasons = []
    if kind == "longrope" and params.get("short_factor") != params.get("long_factor"):
        reasons.append(
            f"vLLM chooses LongRoPE's list once by --max-model-len ({probe.target_length:,} > L0: long at every "
            "position), transformers by the current length"
        )
    if kind == "longrope" and params.get("attention_factor") is not None:
        reasons.append(
            "vLLM ignores longrope's attention_factor (it reads short_mscale/long_mscale, else derives "
            "sqrt(1 + ln(M/L0)/ln L0) from --max-model-len M)"
        )
    if kind == "dynamic":
        reasons.append(f"vLLM's dynamic is static NTK at the maximum length {probe.target_length:,}")
    return reasons


def row(folder: Path, config: dict[str, Any], probe: Probe, reference: Answer, *, gguf: Path | None) -> EngineRow:
    interpreter = python()
    where = launch(config, probe, folder)
    if interpreter is None:
        why = f"no vLLM environment ({DEFAULT_PYTHON}; make vllm-env, or set ROPEKIT_VLLM_PYTHON)"
        return EngineRow(NAME, None, "cannot run here", why, where)
    done = subprocess.run(
        [str(interpreter), "-P", str(Path(__file__).with_name("_vllm_probe.py"))],  # -P: not this folder,
        input=json.dumps(request_for(config, probe, reference)),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return failed_row(done.stderr, where)
    return row_from_reply(json.loads(done.stdout.strip().splitlines()[-1]), config, probe, reference, where)


def request_for(config: dict[str, Any], probe: Probe, reference: Answer) -> dict[str, Any]:
    """What :mod:`ropekit.engines._vllm_probe` reads: the rotary module's arguments and the positions per length."""
    half = int(next(iter(reference.tables.values())).shape[1])
    return {
        "head_size": int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]),
        "rotary_dim": 2 * half,
        "max_position": probe.target_length,
        "rope_parameters": config.get("rope_parameters"),
        "served": {str(n): positions_below(probe, n).tolist() for n in probe.served_lengths},
    }


def failed_row(stderr: str, where: str) -> EngineRow:
    """The row of a vLLM run that failed, from its last line of stderr."""
    last = (stderr.strip().splitlines() or ["no output"])[-1]
    verdict = "cannot express" if "ValueError" in last or "NotImplementedError" in last else "cannot run here"
    return EngineRow(NAME, None, verdict, f"vLLM failed: {last}", where)


def row_from_reply(
    reply: dict[str, Any], config: dict[str, Any], probe: Probe, reference: Answer, where: str
) -> EngineRow:
    """vLLM's verdict from the probe's reply (its tables against the reference's)."""
    theirs = Answer(tables={int(n): np.asarray(t, dtype=np.float64) for n, t in reply["tables"].items()})
    verdict, detail, numbers = judge(reference, theirs, probe, known=known_behaviours(config, probe))
    numbers["mscale"] = reply.get("mscale")
    return EngineRow(NAME, reply["version"], verdict, f"{detail} (rotary module only)", where, numbers)
