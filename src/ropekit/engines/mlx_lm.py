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
measured difference where the model runs here; so does an architecture whose MLX-LM model file reads no scaling
at all (StableLM, Cohere, GPT-NeoX, GLM-4: :func:`reads_no_scaling`); the rest, where a config differs, are
"differs" with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import (
    Answer,
    Case,
    EngineRow,
    Probe,
    judge,
    positions_below,
    rotation_table,
    unit_probe,
)
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


class _Exited(Exception):
    """MLX-LM's code called ``sys.exit`` (its ``olmo.py`` does where ``ai2-olmo`` is not installed)."""


def _answer_or_exit(case: Case) -> Answer:
    """:func:`answer` on the case, with what MLX-LM prints kept off stdout (``--json`` stays one document); its
    ``sys.exit`` becomes :class:`_Exited`, with the last line it printed."""
    import contextlib
    import io

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return answer(case.folder, case.probe, rotary_half(case.reference), case.reference.interleaved)
    except SystemExit as exit_:
        lines = printed.getvalue().strip().splitlines()
        raise _Exited(lines[-1] if lines else f"exit status {exit_.code}") from None


def row(case: Case) -> EngineRow:
    """MLX-LM's verdict on ``case.folder`` (it reads the folder)."""
    folder, found = case.folder, version()
    if found is None:
        return EngineRow(
            NAME, None, "cannot run here", "mlx-lm is not installed (pip install 'mlx[cpu]' mlx-lm)", launch(folder)
        )
    gaps = [] if case.config.get("model_type") == "ministral3" else older_reader_gaps(case.config)
    unread = reads_no_scaling(case)
    try:
        theirs = _answer_or_exit(case)
    except _Exited as exited:
        why = f"MLX-LM's model file for {case.config.get('model_type')} exits as it loads: {exited}"
        return EngineRow(NAME, found, "cannot run here", why, launch(folder))
    except (ValueError, KeyError, NotImplementedError, AttributeError, TypeError) as error:
        if unread:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            return EngineRow(NAME, found, "cannot express", f"{unread} (not run: {first})", launch(folder))
        if "RoPE type" in str(error):  # initialize_rope: "Unsupported RoPE type ..."
            return EngineRow(NAME, found, "cannot express", f"MLX-LM: {error}", launch(folder))
        first = str(error).strip().splitlines()[0]
        why = f"MLX-LM cannot load this checkpoint: {first}"
        if gaps:
            return EngineRow(NAME, found, "cannot express", f"{'; '.join(gaps)} (not run: {why})", launch(folder))
        return EngineRow(NAME, found, "cannot run here", why, launch(folder))
    known = gaps + known_behaviours(case.config) + whole_head(case) + ([unread] if unread else [])
    verdict, detail, numbers = judge(case.reference, theirs, case.probe, known=known)
    if unread:
        return EngineRow(NAME, found, "cannot express", f"{unread}; measured: {detail}", launch(folder), numbers)
    if gaps:
        detail = detail if verdict == "differs" else f"{'; '.join(gaps)}; measured: {detail}"
        return EngineRow(NAME, found, "cannot express", detail, launch(folder), numbers)
    return EngineRow(NAME, found, verdict, detail, launch(folder), numbers)


def whole_head(case: Case) -> list[str]:
    """Why MLX-LM rotates other dimensions than transformers where its model file reads no partial rotary width
    and transformers rotates part of the head (GLM's half)."""
    from ropekit.engines.model_class import mlx_reads_partial

    kind = str(case.config.get("model_type"))
    head = int(case.config.get("head_dim") or case.config["hidden_size"] // case.config["num_attention_heads"])
    rotary = 2 * rotary_half(case.reference)
    path, reads = mlx_reads_partial(kind)
    if reads or rotary >= head:
        return []
    return [
        f"MLX-LM's {path} rotates the whole head ({head} dims, it reads no partial rotary width); transformers "
        f"rotates {rotary}"
    ]


def reads_no_scaling(case: Case) -> str | None:
    """Why MLX-LM cannot express the folder's scaling where its model file for the architecture reads none
    (:func:`ropekit.engines.model_class.mlx_reads_scaling`) or runs another (:func:`file_rule`), else ``None``."""
    from ropekit.engines.model_class import mlx_reads_scaling, scaled
    from ropekit.engines.transformers_ref import rope_parameters

    kind = str(case.config.get("model_type"))
    params = rope_parameters(case.folder, case.reference.rope_key)
    if not scaled(params):
        return None
    path, reads = mlx_reads_scaling(kind)
    if not reads:
        return f"MLX-LM's {kind} reads no scaling ({path} builds its RoPE from the base alone)"
    return file_rule(kind, str(params.get("rope_type")), compared_layer(case.folder)[1], case.reference.interleaved)


def file_rule(model_type: str, scaling: str, layer_type: str | None, interleaved: bool = False) -> str | None:
    """What MLX-LM's model file for ``model_type`` does instead of ``scaling`` on the compared layer, where it
    names a scaling but does not run this one: its ``file`` rows of :data:`ropekit.engines.rules.RULES` (``None``:
    nothing known). ``interleaved``: transformers rotates pairs (2i, 2i + 1) on this model."""
    from ropekit.engines.model_class import mlx_source
    from ropekit.engines.rules import Context, reasons

    _, source = mlx_source(model_type)
    params, config = {"rope_type": scaling}, {"model_type": model_type}
    found = reasons(NAME, "file", version(), Context(params, config, layer_type, interleaved, source))
    return found[0] if found else None


def answer(folder: Path, probe: Probe, half: int, interleaved: bool = False) -> Answer:
    """MLX-LM's tables (its RoPE module of the compared layer, on probe vectors paired as ``interleaved`` says),
    softmax scale and logits."""
    import mlx.core as mx
    from mlx_lm.utils import load_model

    model, _ = load_model(Path(folder))
    index, _ = compared_layer(folder)
    attention = model.layers[index].self_attn
    result = Answer(softmax_scale=_scale(attention))
    width = int(getattr(attention, "head_dim", 2 * half))
    for served in probe.served_lengths:
        # the probe in transformers' pairing: an MLX-LM module that pairs other dimensions computes another table
        vector = np.broadcast_to(unit_probe(half, width, interleaved), (1, 1, served, width))
        rotated = np.array(attention.rope(mx.array(vector)), dtype=np.float64)[0, 0]
        result.tables[served] = rotation_table(rotated[positions_below(probe, served)], half, interleaved)
    if probe.ids:
        logits = model(mx.array([list(probe.ids)]))
        result.logits = np.array(logits[0].astype(mx.float32), dtype=np.float64)
    return result


def _scale(attention: Any) -> float | None:
    """The factor on q·k in MLX-LM's attention module (its ``scale``), if it has one."""
    value = getattr(attention, "scale", None)
    return None if value is None else float(value)
