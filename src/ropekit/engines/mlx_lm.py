"""MLX-LM (``pip install "mlx[cpu]" mlx-lm``): its own loader, RoPE modules and model on the folder.

What MLX-LM 0.32 does with a config (``mlx_lm/models/rope_utils.py`` ``initialize_rope``), the documented reasons it
may compute something else than transformers:

* it reads ``rope_theta`` (default 10,000) and ``rope_scaling``, never ``rope_parameters``;
* ``longrope`` (``SuScaledRoPE``): always the long factors, at every length; the attention factor is
  √(1 + ln(M/L0)/ln L0) with M = ``max_position_embeddings``, ``attention_factor`` is not read;
* ``yarn``: the attention factor is mscale(s, mscale)/mscale(s, mscale_all_dim); ``attention_factor`` and
  ``truncate`` are not read (the ramp ends are always floor/ceil);
* ``dynamic``: the base follows the length of each call (the same as transformers for one forward pass).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import Answer, EngineRow, Probe, judge, positions_below, rotation_table
from ropekit.engines.transformers_ref import compared_layer, rotary_half

NAME = "MLX-LM"


def version() -> str | None:
    try:
        import mlx_lm
    except ImportError:
        return None
    return mlx_lm.__version__


def launch(folder: Path) -> str:
    """MLX-LM runs the folder as it is (:func:`ropekit.engines.launch.launch_lines`)."""
    import json

    from ropekit.engines.launch import launch_lines

    config = json.loads((Path(folder) / "config.json").read_text())
    return launch_lines(config, int(config.get("max_position_embeddings") or 0), folder=folder)[NAME].text()


def known_behaviours(config: dict[str, Any]) -> list[str]:
    """The documented MLX-LM behaviours (module docstring) that apply to ``config``."""
    reasons = []
    params = config.get("rope_parameters") or {}
    if "rope_theta" not in config and params.get("rope_theta", 10000.0) != 10000.0:
        reasons.append("MLX-LM reads rope_theta (absent: 10,000), not rope_parameters")
    scaling = config.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default" and "rope_type" in params:
        reasons.append("MLX-LM reads rope_scaling (absent: no scaling), not rope_parameters")
    scaling = scaling or {}
    kind = scaling.get("rope_type") or scaling.get("type")
    if kind == "longrope":
        if scaling.get("short_factor") != scaling.get("long_factor"):
            reasons.append("MLX-LM always uses long_factor; transformers uses short_factor up to L0")
        if scaling.get("attention_factor") is not None:
            reasons.append("MLX-LM ignores longrope's attention_factor (uses sqrt(1 + ln(M/L0)/ln L0))")
    if kind == "yarn":
        if scaling.get("attention_factor") is not None:
            reasons.append("MLX-LM ignores yarn's attention_factor (uses mscale/mscale_all_dim)")
        if scaling.get("truncate") is False:
            reasons.append("MLX-LM ignores truncate: false (always floor/ceil ramp ends)")
    return reasons


def row(folder: Path, config: dict[str, Any], probe: Probe, reference: Answer, *, gguf: Path | None) -> EngineRow:
    """MLX-LM's verdict on ``folder`` (it reads the folder; ``gguf`` is not used)."""
    found = version()
    if found is None:
        return EngineRow(
            NAME, None, "cannot run here", "mlx-lm is not installed (pip install 'mlx[cpu]' mlx-lm)", launch(folder)
        )
    try:
        theirs = answer(folder, probe, rotary_half(reference))
    except (ValueError, KeyError, NotImplementedError) as error:
        if "RoPE type" in str(error):  # initialize_rope: "Unsupported RoPE type ..."
            return EngineRow(NAME, found, "cannot express", f"MLX-LM: {error}", launch(folder))
        first = str(error).strip().splitlines()[0]
        return EngineRow(NAME, found, "cannot run here", f"MLX-LM cannot load this checkpoint: {first}", launch(folder))
    verdict, detail, numbers = judge(reference, theirs, probe, known=known_behaviours(config))
    return EngineRow(NAME, found, verdict, detail, launch(folder), numbers)


def answer(folder: Path, probe: Probe, half: int) -> Answer:
    """MLX-LM's tables (its RoPE module of the compared layer, on probe vectors), softmax scale and logits."""
    import mlx.core as mx
    from mlx_lm.utils import load_model

    model, _ = load_model(Path(folder))
    index, _ = compared_layer(folder)
    attention = model.layers[index].self_attn
    result = Answer(softmax_scale=_scale(attention))
    width = int(getattr(attention, "head_dim", 2 * half))
    for served in probe.served_lengths:
        vector = np.zeros((1, 1, served, width), dtype=np.float32)
        vector[..., :half] = 1.0
        rotated = np.array(attention.rope(mx.array(vector)), dtype=np.float64)[0, 0]
        result.tables[served] = rotation_table(rotated[positions_below(probe, served)], half)
    if probe.ids:
        logits = model(mx.array([list(probe.ids)]))
        result.logits = np.array(logits[0].astype(mx.float32), dtype=np.float64)
    return result


def _scale(attention: Any) -> float | None:
    """The factor on q·k in MLX-LM's attention module (its ``scale``), if it has one."""
    value = getattr(attention, "scale", None)
    return None if value is None else float(value)
