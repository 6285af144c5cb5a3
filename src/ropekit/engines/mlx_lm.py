"""MLX-LM (``pip install "mlx[cpu]" mlx-lm``): its own loader, RoPE modules and model on the folder.

What MLX-LM 0.32 does with a config (``mlx_lm/models/rope_utils.py`` ``initialize_rope``), the documented reasons it
may compute something else than transformers:

* it reads ``rope_theta`` (default 10,000) and ``rope_scaling``, never ``rope_parameters`` (except Ministral 3);
* ``longrope`` (``SuScaledRoPE``): always the long factors, at every length; the attention factor is
  √(1 + ln(M/L0)/ln L0) with M = ``max_position_embeddings``, ``attention_factor`` is not read;
* ``yarn``: the attention factor is g(s, mscale)/g(s, mscale_all_dim); ``attention_factor`` and ``truncate`` are
  not read (the ramp ends are always floor/ceil);
* ``dynamic``: the base follows the length of each call (the same as transformers for one forward pass).

What the older keys cannot say to it at all (:func:`ropekit.integrations.hf.legacy_keys.older_reader_gaps`: yarn
``truncate: false``, an attention factor its formulas cannot reach) makes the row "cannot express", with the
measured difference where the model runs here; the rest, where a config differs, are "differs" with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import Answer, Case, EngineRow, Probe, judge, positions_below, rotation_table
from ropekit.engines.transformers_ref import compared_layer, rotary_half
from ropekit.integrations.hf.legacy_keys import older_reader_gaps, yarn_factors

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
    if kind == "longrope" and scaling.get("short_factor") != scaling.get("long_factor"):
        reasons.append("MLX-LM always uses long_factor; transformers uses short_factor up to L0")
    factors = yarn_factors(scaling) if kind == "yarn" else None
    if factors is not None and abs(factors[1] / factors[0] - 1) > 1e-9:
        reasons.append(
            f"MLX-LM reads no attention_factor: this rope_scaling's mscale/mscale_all_dim give {factors[1]:.6g}, "
            f"transformers uses {factors[0]:.6g} (ropekit writes an mscale that agrees where one exists)"
        )
    return reasons


def row(case: Case) -> EngineRow:
    """MLX-LM's verdict on ``case.folder`` (it reads the folder)."""
    folder, found = case.folder, version()
    if found is None:
        return EngineRow(
            NAME, None, "cannot run here", "mlx-lm is not installed (pip install 'mlx[cpu]' mlx-lm)", launch(folder)
        )
    gaps = [] if case.config.get("model_type") == "ministral3" else older_reader_gaps(case.config)
    try:
        theirs = answer(folder, case.probe, rotary_half(case.reference))
    except (ValueError, KeyError, NotImplementedError) as error:
        if "RoPE type" in str(error):  # initialize_rope: "Unsupported RoPE type ..."
            return EngineRow(NAME, found, "cannot express", f"MLX-LM: {error}", launch(folder))
        first = str(error).strip().splitlines()[0]
        why = f"MLX-LM cannot load this checkpoint: {first}"
        if gaps:
            return EngineRow(NAME, found, "cannot express", f"{'; '.join(gaps)} (not run: {why})", launch(folder))
        return EngineRow(NAME, found, "cannot run here", why, launch(folder))
    known = gaps + known_behaviours(case.config)
    verdict, detail, numbers = judge(case.reference, theirs, case.probe, known=known)
    if gaps:
        detail = detail if verdict == "differs" else f"{'; '.join(gaps)}; measured: {detail}"
        return EngineRow(NAME, found, "cannot express", detail, launch(folder), numbers)
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
    paired = bool(getattr(attention.rope, "traditional", False))  # pairs (2i, 2i + 1), as DeepSeek's MLA runs
    for served in probe.served_lengths:
        vector = np.zeros((1, 1, served, width), dtype=np.float32)
        if paired:
            vector[..., : 2 * half : 2] = 1.0  # the first of each pair (2i, 2i + 1)
        else:
            vector[..., :half] = 1.0  # the first of each pair (i, i + d/2)
        rotated = np.array(attention.rope(mx.array(vector)), dtype=np.float64)[0, 0]
        if paired:  # to the half-split layout rotation_table reads
            rotated = np.concatenate([rotated[:, 0 : 2 * half : 2], rotated[:, 1 : 2 * half : 2]], axis=1)
        result.tables[served] = rotation_table(rotated[positions_below(probe, served)], half)
    if probe.ids:
        logits = model(mx.array([list(probe.ids)]))
        result.logits = np.array(logits[0].astype(mx.float32), dtype=np.float64)
    return result


def _scale(attention: Any) -> float | None:
    """The factor on q·k in MLX-LM's attention module (its ``scale``), if it has one."""
    value = getattr(attention, "scale", None)
    return None if value is None else float(value)
