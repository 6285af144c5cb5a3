"""The short Python API: ``ropekit.patch``, ``ropekit.extend`` and ``ropekit.evaluate``, one name each for what a
notebook does most, over the functions the commands run.

* :func:`patch` — a method inside a loaded transformers model, in place
  (:func:`~ropekit.integrations.hf.patch_rope.apply_scaling` for a scaling,
  :func:`~ropekit.integrations.hf.patch_attention.apply_attention` for an attention method);
* :func:`extend` — a model folder or ``.gguf`` file copied with a scaling written into its config
  (:func:`ropekit.integrations.hf.extend.extend`, what ``ropekit extend`` runs);
* :func:`evaluate` — the RULER-style task suite per method and length
  (:func:`ropekit.eval.run.run_task_suite`, what ``ropekit eval tasks`` runs), returning the result it prints.

A method is named as on the command line (``"yarn"``, ``"linear"``, ``"none"``, ``"self_extend"``), and its
parameters are keywords; ``factor`` is relative to the model's original (pre-training) length, as ``--factor`` is.
Everything heavier than the standard library is imported inside the functions, so ``import ropekit`` stays light
and the core never loads the packages above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ropekit.eval.models import EvalModel
    from ropekit.eval.tasks.run import TaskResult
    from ropekit.integrations.hf.extend import ExtendResult
    from ropekit.scaling import ScalingConfig

__all__ = ["evaluate", "extend", "patch"]


def _scaling(
    method: str, factor: float | None, original_length: int, native: ScalingConfig | None, params: dict[str, Any]
) -> ScalingConfig | None:
    """The scaling config ``method`` names, built as the CLI builds it (``from_options``: the factor, the original
    length, the model's own scaling for parameters only a trained model has, then ``params`` by field name)."""
    from ropekit.scaling import get_scaling

    if method in ("none", "default"):
        if factor is not None or params:
            raise ValueError(f"method {method!r} (plain RoPE) takes no parameters, got {sorted({'factor', *params})}")
        return None
    return get_scaling(method).config_class.from_options(
        factor=factor, original_length=original_length, native=native, **params
    )


def patch(
    model: Any,
    method: str,
    *,
    factor: float | None = None,
    layer_types: Sequence[str] | None = None,
    **params: Any,
) -> Any:
    """Put ``method`` inside a loaded transformers ``model``, in place; returns ``model``.

    A scaling (``"yarn"``, ``"linear"``, ``"llama3"``, ..., or ``"none"`` for plain RoPE) replaces the rotary modules
    and rewrites ``model.config`` to its native form, so ``model.save_pretrained`` writes the extended model. An
    attention method (``"self_extend"``, ``"rerope"``, ...) changes which positions attention sees and keeps the
    model's current RoPE, so ``patch(model, "yarn", ...)`` then ``patch(model, "self_extend", ...)`` composes them.

    Args:
        model: a transformers causal LM whose RoPE ropekit can replace.
        method: a scaling's ``rope_type`` or an attention method's name.
        factor: the scaling factor, relative to the model's original length; for an attention method, the length
            its parameters are derived for (``factor`` × the original length) where they are not given.
        layer_types: on per-layer-type models (Gemma 3), which layer types get the method (default: full attention).
        **params: the method's own fields by name (``beta_fast=``, ``original_max_position_embeddings=``; Self-Extend's
            ``group=``, ``window=``).

    Returns:
        ``model``, patched.

    Raises:
        ValueError: an unknown method or parameter, a value out of range, or a model ropekit cannot patch.

    Example:
        >>> import ropekit
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...                      num_attention_heads=2, max_position_embeddings=256)
        >>> model = ropekit.patch(LlamaForCausalLM(config), "yarn", factor=4)
        >>> model.config.rope_parameters["rope_type"], model.config.max_position_embeddings
        ('yarn', 1024)
        >>> model = ropekit.patch(model, "self_extend", group=4, window=64)
        >>> model.ropekit_attention_method.describe()
        {'attention': 'self_extend', 'group': 4, 'window': 64}
    """
    from ropekit.attention.registry import get_attention, list_attentions

    if method in list_attentions():
        from ropekit._validate import require_float
        from ropekit.integrations.hf.model_config import original_length_of, rope_of
        from ropekit.integrations.hf.patch_attention import apply_attention

        original = original_length_of(model, rope_of(model))
        length = original if factor is None else round(original * require_float("factor", factor, at_least=1.0))
        attention = get_attention(method).from_options(train_length=original, length=length, **params)
        return apply_attention(model, attention, layer_types=layer_types)
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of
    from ropekit.integrations.hf.patch_rope import apply_scaling

    source = getattr(model, "ropekit_source_config", None) or model  # the config as loaded: factor is relative to it
    rope = rope_of(source, first_scaled_type(source, layer_types))
    scaling = _scaling(method, factor, original_length_of(source, rope), rope.scaling, params)
    return apply_scaling(model, scaling, layer_types=layer_types)


def extend(
    model: str | Path,
    method: str,
    *,
    out: str | Path,
    factor: float | None = None,
    target_length: int | None = None,
    layer_types: Sequence[str] | None = None,
    force: bool = False,
    **params: Any,
) -> ExtendResult:
    """Copy ``model`` (a transformers folder or a ``.gguf`` file) to the folder ``out`` with ``method`` written into
    its ``config.json``, so that plain transformers loads it extended; the weights are copied as they are.

    Args:
        model: the model folder or ``.gguf`` file.
        method: a scaling's ``rope_type`` (``"none"``: plain RoPE at the model's base).
        out: the new folder (files already there that the copy writes are replaced only with ``force``).
        factor: the scaling factor, relative to the model's original length.
        target_length: ``max_position_embeddings`` to write (default: the original length × ``factor``).
        layer_types: on per-layer-type models, which layer types to scale.
        force: replace the files of ``out`` that the copy writes.
        **params: the method's own fields by name (``beta_fast=``, ``original_max_position_embeddings=``).

    Returns:
        What was written: the folder (``.out``), its config (``.config``) and a note per RoPE (``.notes``).

    Raises:
        ValueError: an unknown method or parameter, a value out of range, or a model or ``out`` ropekit refuses.
        FileExistsError: ``out`` holds files the copy writes and ``force`` is false.
        FileNotFoundError: no model at ``model``.

    Example:
        >>> import tempfile, ropekit
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> folder = tempfile.mkdtemp()
        >>> LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...     num_attention_heads=2, max_position_embeddings=256)).save_pretrained(f"{folder}/model")
        >>> result = ropekit.extend(f"{folder}/model", "yarn", factor=4, out=f"{folder}/yarn")
        >>> result.config["rope_parameters"]["rope_type"], result.config["max_position_embeddings"]
        ('yarn', 1024)
    """
    from ropekit.integrations.hf.extend import extend as extend_folder
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of

    config = load_config(Path(model))
    rope = rope_of(config, first_scaled_type(config, layer_types))
    original = original_length_of(config, rope)
    scaling = _scaling(method, factor, original, rope.scaling, params)
    return extend_folder(model, scaling, out, target_length=target_length, layer_types=layer_types, force=force)


def evaluate(
    model: str | Path | EvalModel,
    *,
    tasks: Sequence[str] | None = None,
    lengths: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    multiples: Sequence[float] | None = None,
    samples: int | None = None,
    seed: int = 0,
    text: str | Path | None = None,
) -> TaskResult:
    """The RULER-style tasks of ``model`` per method and length, with the effective length: what ``ropekit eval
    tasks`` prints (its tables from the result's rows and ``summary()``, its ``--json`` from ``to_dict()``).

    Args:
        model: ``"tiny"`` (the bundled model), a transformers folder, a ``.gguf`` file, or an evaluation model
            already loaded (:func:`ropekit.eval.models.load_eval_model`).
        tasks: task names (default: RULER's tasks; :func:`ropekit.synthetic.suite.parse_tasks` reads ``"all"``).
        lengths: lengths in tokens (default: ``multiples`` of the training length).
        methods: as ``--methods`` (``"none"``, ``"yarn"``, ``"self_extend"``, ``"yarn+self_extend"``; default: the
            command's default list).
        multiples: lengths as multiples of the training length, when ``lengths`` is not given (default: the
            command's).
        samples: samples per (length, task) (default: the command's).
        seed: the seed of the samples.
        text: the haystack text, a file or folder (default: the shipped held-out text).

    Returns:
        A :class:`~ropekit.eval.tasks.run.TaskResult`: ``rows`` (one per method × length × task, with its Wilson
        interval), ``summary()`` (means and effective lengths), ``to_dict()`` (the ``--json`` output).

    Raises:
        ValueError: an unknown task or method, a bad length or count; before any forward pass, an
            :class:`~ropekit.errors.InvalidArgument` about ``lengths``/``multiples`` (none of the tasks fits the
            lengths, or the model or memory cannot take them), ``methods`` (none can run) or ``text``.
        FileNotFoundError: no model at ``model``, or no ``text``.

    Example:
        >>> import ropekit
        >>> result = ropekit.evaluate("tiny", tasks=["niah_single_1"], lengths=[256], methods=["none"], samples=2)
        >>> [(row["method"], row["length"], row["task"], row["samples"]) for row in result.rows]
        [('none', 256, 'niah_single_1', 2)]
    """
    from ropekit.eval.checks import prepare_tasks
    from ropekit.eval.methods import default_methods
    from ropekit.eval.models import load_eval_model
    from ropekit.eval.run import run_task_suite
    from ropekit.eval.tasks.limits import SAMPLES
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.eval.text import read_text, shipped_text, tokenize
    from ropekit.synthetic.suite import RULER, suite_tasks

    chosen = {
        "methods": tuple(default_methods() if methods is None else methods),
        "tasks": suite_tasks(RULER) if tasks is None else tuple(tasks),
        "lengths": None if lengths is None else tuple(lengths),
        "samples": SAMPLES if samples is None else samples,
        "seed": seed,
    }
    if multiples is not None:
        chosen["multiples"] = tuple(multiples)
    settings = TaskSettings(**chosen)  # checked before the model loads
    loaded = load_eval_model(model) if isinstance(model, str | Path) else model
    tokens = tokenize(read_text(Path(text)) if text is not None else shipped_text(), loaded.encode, loaded.separator)
    # none fits: prepared again with every task, for the first task's refusal
    prepared = prepare_tasks(loaded, settings, tokens, leave_out=True) or prepare_tasks(loaded, settings, tokens)
    return run_task_suite(loaded, prepared, tokens)
