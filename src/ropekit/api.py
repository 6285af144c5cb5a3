"""The short Python API: ``ropekit.patch``, ``ropekit.extend``, ``ropekit.evaluate`` and ``ropekit.search``, one name each for what a
notebook does most, over the functions the commands run.

* :func:`patch` — a method inside a loaded transformers model, in place
  (:func:`~ropekit.integrations.hf.patch_rope.apply_scaling` for a scaling,
  :func:`~ropekit.integrations.hf.patch_attention.apply_attention` for an attention method);
* :func:`extend` — a model folder or ``.gguf`` file copied with a scaling written into its config
  (:func:`ropekit.integrations.hf.extend.extend`, what ``ropekit extend`` runs);
* :func:`evaluate` — the RULER-style task suite per method and length
  (:func:`ropekit.eval.run.run_task_suite`, what ``ropekit eval tasks`` runs), returning the result it prints;
* :func:`search` — per-pair RoPE factors searched for a model (:func:`ropekit.search.pipeline.search_model`, what
  ``ropekit search`` runs), returning what it writes to ``search.json``.

A method is named as on the command line (``"yarn"``, ``"linear"``, ``"none"``, ``"self_extend"``), and its
parameters are keywords; ``factor`` is relative to the model's original (pre-training) length, as ``--factor`` is,
and a scaling is resolved from them by the function the commands use
(:func:`~ropekit.integrations.resolve.resolve_scaling`).
Everything heavier than the standard library is imported inside the functions, so ``import ropekit`` stays light
and the core never loads the packages above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ropekit.eval.protocol import EvalModel
    from ropekit.eval.tasks.run import TaskResult
    from ropekit.integrations.hf.extend import ExtendResult

__all__ = ["evaluate", "extend", "patch", "search"]


def _several(value: Any, kind: Any) -> tuple[Any, ...]:
    """``value`` as a tuple: one ``kind`` (a name, a length) is a tuple of one, never iterated into characters."""
    return (value,) if isinstance(value, kind) else tuple(value)


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
    from ropekit.integrations.resolve import resolve_scaling

    source = getattr(model, "ropekit_source_config", None) or model  # the config as loaded: factor is relative to it
    rope = rope_of(source, first_scaled_type(source, layer_types))
    original = original_length_of(source, rope)
    scaling = resolve_scaling(method, rope=rope, original_length=original, factor=factor, params=params).scaling
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
        factor: the scaling factor, relative to the model's original length (default: ``target_length`` / the
            original length).
        target_length: ``max_position_embeddings`` to write (default: the original length × ``factor``); given
            with ``factor``, the two must agree (:func:`ropekit.integrations.resolve.resolve_scaling`).
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
    from ropekit.integrations.resolve import resolve_scaling

    config = load_config(Path(model))
    rope = rope_of(config, first_scaled_type(config, layer_types))
    original = original_length_of(config, rope)
    resolved = resolve_scaling(
        method, rope=rope, original_length=original, factor=factor, target_length=target_length, params=params
    )
    target = resolved.target_length
    return extend_folder(model, resolved.scaling, out, target_length=target, layer_types=layer_types, force=force)


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
    params: dict[str, Any] | None = None,
) -> TaskResult:
    """The RULER-style tasks of ``model`` per method and length, with the effective length: what ``ropekit eval
    tasks`` prints (its tables from the result's rows and ``summary()``, its ``--json`` from ``to_dict()``).

    Args:
        model: ``"tiny"`` (the bundled model), a transformers folder, a ``.gguf`` file, or an evaluation model
            already loaded (:func:`ropekit.eval.loader.load_eval_model`).
        tasks: task names, or one name as a string (default: RULER's tasks;
            :func:`ropekit.synthetic.suite.parse_tasks` reads ``"all"``).
        lengths: lengths in tokens, or one length (default: ``multiples`` of the training length; an empty list is
            refused).
        methods: as ``--methods`` (``"none"``, ``"yarn"``, ``"self_extend"``, ``"yarn+self_extend"``), or one
            method as a string (default: the command's default list).
        multiples: lengths as multiples of the training length, when ``lengths`` is not given (default: the
            command's).
        samples: samples per (length, task) (default: the command's).
        seed: the seed of the samples.
        text: the haystack text, a file or folder (default: the shipped held-out text).
        params: as ``--param``: the attention methods' parameters (``{"group": 4}``) and the ``searched`` method's
            ``{"factors": "DIR/search.json"}`` (the output of ``ropekit search``).

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
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.methods import default_methods
    from ropekit.eval.run import run_task_suite
    from ropekit.eval.tasks.limits import SAMPLES
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.eval.text import read_text, shipped_text, tokenize
    from ropekit.synthetic.suite import RULER, suite_tasks

    chosen = {
        "methods": _several(default_methods() if methods is None else methods, str),
        "tasks": suite_tasks(RULER) if tasks is None else _several(tasks, str),
        "lengths": None if lengths is None else _several(lengths, int),
        "samples": SAMPLES if samples is None else samples,
        "seed": seed,
        "params": dict(params or {}),
    }
    if multiples is not None:
        chosen["multiples"] = _several(multiples, int | float)
    settings = TaskSettings(**chosen)  # checked before the model loads
    loaded = load_eval_model(model) if isinstance(model, str | Path) else model
    tokens = tokenize(read_text(Path(text)) if text is not None else shipped_text(), loaded.encode, loaded.separator)
    prepared = prepare_tasks(loaded, settings, tokens, leave_out=True)  # none fits: the first task's refusal
    return run_task_suite(loaded, prepared, tokens)


def search(
    model: str | Path = "tiny",
    *,
    out: str | Path,
    target_length: int | None = None,
    target_multiple: float | None = None,
    evaluations: int | None = None,
    budget_seconds: float | None = None,
    force: bool = False,
    dry_run: bool = False,
    progress: Callable[[int, int, float], None] | None = None,
    log: Callable[[str], None] | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Search per-pair RoPE factors (``longrope`` form) for ``model`` at a target length into the folder ``out``:
    what ``ropekit search`` runs (docs/search.md). A stopped search resumes from ``out``'s journal.

    Args:
        model: ``"tiny"`` (bundled), a tiny checkpoint, a transformers folder or a ``.gguf`` file.
        out: the output folder: ``search.json``, the journal and (for a transformers model or a GGUF) the model.
        target_length: the target in tokens; or ``target_multiple``: a multiple of the original length.
        evaluations: candidates scored (default 96); or ``budget_seconds``: a time budget turned into that count.
        force: replace what an earlier search wrote in ``out`` (a journal of this same search is resumed anyway).
        dry_run: load, time one candidate and return the plan; nothing is written.
        progress: called after each candidate with (done, total, best score so far).
        log: called with each note; ``on_plan``: with the plan before the search starts.
        **settings: the other fields of :class:`~ropekit.search.request.SearchRequest` (``samples``,
            ``heldout_samples``, ``seed``, ``text``, ``batch_size``, ``population``, ``parents``, ``switch``,
            ``dtype``, ``device_map``, ``space``, ``short_tolerance``).

    Under ``accelerate launch`` every process calls it; each scores a share of every generation, the main process
    alone writes ``out``, and every process returns the same result (docs/search.md).

    Returns:
        ``search.json``'s contents (:mod:`ropekit.search.result`); with ``dry_run``, the plan.

    Raises:
        ValueError: (an :class:`~ropekit.errors.InvalidArgument` naming the keyword) a bad setting, model, text,
            target or memory plan; a journal in ``out`` of another search without ``force``, or not ropekit's.
        FileExistsError: ``out`` holds what the search writes and ``force`` is false.
        FileNotFoundError: no model or text, or no parent folder for ``out``.
    """
    from ropekit.search.pipeline import search_model
    from ropekit.search.request import SearchRequest

    request = SearchRequest(
        model=str(model),
        target_length=target_length,
        target_multiple=target_multiple,
        evaluations=evaluations,
        budget_seconds=budget_seconds,
        **{key: str(value) if key == "text" and value is not None else value for key, value in settings.items()},
    )
    return search_model(
        request,
        out,
        force=force,
        dry_run=dry_run,
        log=log,
        on_plan=on_plan,
        progress=progress,
        launch=_launch_lines,
    )


def _launch_lines(config: dict[str, Any], target_length: int, folder: Path, model: str) -> dict[str, Any]:
    """Each engine's launch line for a written model folder, as ``{engine: {command, alternative, note}}``."""
    from ropekit.engines.launch import launch_lines

    lines = launch_lines(config, target_length, folder=folder, model=model, method="search")
    return {name: line.as_dict() for name, line in lines.items()}
