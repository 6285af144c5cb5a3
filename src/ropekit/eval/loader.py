"""Which evaluation model a name or path is, loaded: the one place that chooses between the tiny model, a
transformers model and another engine's backend (:mod:`ropekit.eval.engine_choice`), apart from every backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ropekit._bundled import is_tiny_checkpoint
from ropekit.errors import MissingFile
from ropekit.eval.model_support import torch_dtype
from ropekit.eval.protocol import EvalModel

if TYPE_CHECKING:
    from ropekit.eval.engine_choice import Server


def load_eval_model(
    spec: str | Path = "tiny",
    *,
    dtype: str = "auto",
    device_map: str | None = None,
    before_weights: Callable[[EvalModel], None] | None = None,
    engine: str = "torch",
    server: Server | None = None,
    tokenizer_only: bool = False,
) -> EvalModel:
    """The evaluation model of ``spec`` on ``engine`` (``torch``: ``"tiny"`` or a tiny checkpoint directory →
    :class:`~ropekit.eval.models.TinyEvalModel`, a transformers directory or ``.gguf`` file →
    :class:`~ropekit.eval.hf_model.HFEvalModel`; ``llamacpp`` and
    ``openai`` with ``server``: :mod:`ropekit.eval.engine_choice`). ``dtype`` (:data:`~ropekit.eval.model_support.DTYPES`) and ``device_map``
    apply to ``torch``; ``before_weights`` runs before a transformers model's weights load (after, for the tiny one);
    ``tokenizer_only`` stops there (tokenizer, config and lengths only).

    Raises:
        InvalidArgument: a bad ``engine``, ``server``, ``dtype`` or ``device_map``, before anything loads; a
            :class:`~ropekit.errors.MissingFile` (about ``spec`` or ``path``) where no model is.
        ValueError: a model ropekit cannot evaluate.
    """
    from ropekit.eval.engine_choice import Server, check_engine, engine_model
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.models import TinyEvalModel

    check_engine(engine, server or Server(), device_map=device_map, dtype=dtype)
    if engine != "torch":
        return engine_model(spec, engine, server or Server())
    torch_dtype(dtype)
    path = Path(spec)
    if str(spec) != "tiny" and not path.exists():
        message = f"model path {str(path)!r} does not exist (or use 'tiny' for the bundled model)"
        raise MissingFile("spec", str(path), message=message, leads=False)
    if is_tiny_checkpoint(spec):
        model = TinyEvalModel("tiny" if str(spec) == "tiny" else path, dtype=dtype)
        if before_weights is not None:
            before_weights(model)
        return model
    return HFEvalModel(
        path, device_map=device_map, dtype=dtype, before_weights=before_weights, weights=not tokenizer_only
    )
